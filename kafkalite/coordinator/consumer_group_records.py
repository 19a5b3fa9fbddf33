"""The KIP-848 consumer group records of `__consumer_offsets`, byte-exact with Kafka 4.x.

Written out from Kafka's group-coordinator/src/main/resources/common/message/ConsumerGroup*
{Key,Value}.json. Keys: int16 record type, then the key struct (non-flexible, version 0).
Values: int16 version 0, then a flexible struct (compact lengths, tagged fields; the tagged
fields Kafka added later, like MetadataHash, are skipped on read and not written).

  3  ConsumerGroupMetadata              {group}          -> {Epoch}
  4  ConsumerGroupPartitionMetadata     {group}          -> {Epoch, Topics[]}
  5  ConsumerGroupMemberMetadata        {group, member}  -> {InstanceId, RackId, ClientId, ...}
  6  ConsumerGroupTargetAssignmentMetadata {group}       -> {AssignmentEpoch}
  7  ConsumerGroupTargetAssignmentMember   {group, member} -> {TopicPartitions[]}
  8  ConsumerGroupCurrentMemberAssignment  {group, member} -> {MemberEpoch,
         PreviousMemberEpoch, State, AssignedPartitions[], PartitionsPendingRevocation[]}
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from kafkalite.coordinator.consumer_group import (
    ConsumerMember,
    MemberState,
    Partitions,
    TopicInfo,
)
from kafkalite.coordinator.records import InvalidRecord, Reader, Writer

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
_MEMBER_KEYS = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
_VALUE_VERSION = 0
T = TypeVar("T")


class ConsumerGroupRecord(NamedTuple):
    """One record for `__consumer_offsets`, queued in the coordinator's journal."""

    group_id: str
    key: bytes
    value: bytes | None  # None: a tombstone


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int
    group_id: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Partitions
    pending_revocation: Partitions


# -- keys --


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    writer = Writer(flexible=False)
    writer.int16(record_type)
    writer.string(group_id)
    if record_type in _MEMBER_KEYS:
        assert member_id is not None
        writer.string(member_id)
    return writer.getvalue()


def decode_key(data: bytes) -> ConsumerGroupKey | None:
    """The key of a consumer group record; None for any other record type."""
    reader = Reader(data, flexible=False)
    record_type = reader.int16()
    if not GROUP_METADATA <= record_type <= CURRENT_MEMBER_ASSIGNMENT:
        return None
    group_id = reader.string()
    member_id = reader.string() if record_type in _MEMBER_KEYS else None
    reader.finish()
    return ConsumerGroupKey(record_type, group_id, member_id)


# -- records to write --


def tombstone(record_type: int, group_id: str, member_id: str | None = None) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(group_id, encode_key(record_type, group_id, member_id), None)


def group_epoch(group_id: str, epoch: int) -> ConsumerGroupRecord:
    writer = _value_writer()
    writer.int32(epoch)
    return _record(GROUP_METADATA, group_id, None, writer)


def partition_metadata(
    group_id: str, epoch: int, topics: dict[str, TopicInfo]
) -> ConsumerGroupRecord:
    writer = _value_writer()
    writer.int32(epoch)
    writer.array_length(len(topics))
    for name in sorted(topics):
        info = topics[name]
        writer.uuid(info.topic_id)
        writer.string(info.name)
        writer.int32(info.partitions)
        writer.array_length(0)  # PartitionRacks: brokers have no racks here
        writer.end_struct()
    return _record(PARTITION_METADATA, group_id, None, writer)


def member_metadata(group_id: str, member: ConsumerMember) -> ConsumerGroupRecord:
    writer = _value_writer()
    writer.nullable_string(member.instance_id)
    writer.nullable_string(member.rack_id)
    writer.string(member.client_id)
    writer.string(member.client_host)
    writer.array_length(len(member.subscribed_topic_names))
    for name in member.subscribed_topic_names:
        writer.string(name)
    writer.nullable_string(member.subscribed_topic_regex)
    writer.int32(member.rebalance_timeout_ms)
    writer.nullable_string(member.server_assignor)
    return _record(MEMBER_METADATA, group_id, member.member_id, writer)


def target_assignment_metadata(group_id: str, assignment_epoch: int) -> ConsumerGroupRecord:
    writer = _value_writer()
    writer.int32(assignment_epoch)
    return _record(TARGET_ASSIGNMENT_METADATA, group_id, None, writer)


def target_assignment_member(
    group_id: str, member_id: str, partitions: Partitions
) -> ConsumerGroupRecord:
    writer = _value_writer()
    _write_partitions(writer, partitions)
    return _record(TARGET_ASSIGNMENT_MEMBER, group_id, member_id, writer)


def current_member_assignment(group_id: str, member: ConsumerMember) -> ConsumerGroupRecord:
    writer = _value_writer()
    writer.int32(member.member_epoch)
    writer.int32(member.previous_member_epoch)
    writer.int8(int(member.state))
    _write_partitions(writer, member.assigned)
    _write_partitions(writer, member.pending_revocation)
    return _record(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id, writer)


def _value_writer() -> Writer:
    writer = Writer(flexible=True)
    writer.int16(_VALUE_VERSION)
    return writer


def _record(
    record_type: int, group_id: str, member_id: str | None, writer: Writer
) -> ConsumerGroupRecord:
    writer.end_struct()
    return ConsumerGroupRecord(
        group_id, encode_key(record_type, group_id, member_id), writer.getvalue()
    )


def _write_partitions(writer: Writer, partitions: Partitions) -> None:
    by_topic: dict = defaultdict(list)
    for topic_id, partition in sorted(partitions):
        by_topic[topic_id].append(partition)
    writer.array_length(len(by_topic))
    for topic_id, indexes in by_topic.items():
        writer.uuid(topic_id)
        writer.array_length(len(indexes))
        for index in indexes:
            writer.int32(index)
        writer.end_struct()


# -- values to replay --


def decode_group_epoch(data: bytes) -> int:
    reader = _value_reader(data)
    epoch = reader.int32()
    return _finish(reader, epoch)


def decode_partition_metadata(data: bytes) -> tuple[int, dict[str, TopicInfo]]:
    reader = _value_reader(data)
    epoch = reader.int32()
    topics = {}
    for _ in range(reader.array_length()):
        topic_id, name, count = reader.uuid(), reader.string(), reader.int32()
        for _ in range(reader.array_length()):  # PartitionRacks
            reader.int32()
            for _ in range(reader.array_length()):
                reader.string()
            reader.end_struct()
        reader.end_struct()
        topics[name] = TopicInfo(topic_id, name, count)
    return _finish(reader, (epoch, topics))


def decode_member_metadata(member_id: str, data: bytes) -> ConsumerMember:
    reader = _value_reader(data)
    member = ConsumerMember(
        member_id=member_id,
        instance_id=reader.nullable_string(),
        rack_id=reader.nullable_string(),
        client_id=reader.string(),
        client_host=reader.string(),
        subscribed_topic_names=tuple(reader.string() for _ in range(reader.array_length())),
        subscribed_topic_regex=reader.nullable_string(),
        rebalance_timeout_ms=reader.int32(),
        server_assignor=reader.nullable_string(),
    )
    return _finish(reader, member)


def decode_target_assignment_metadata(data: bytes) -> int:
    reader = _value_reader(data)
    epoch = reader.int32()
    return _finish(reader, epoch)


def decode_target_assignment_member(data: bytes) -> Partitions:
    reader = _value_reader(data)
    partitions = _read_partitions(reader)
    return _finish(reader, partitions)


def decode_current_member_assignment(data: bytes) -> CurrentAssignment:
    reader = _value_reader(data)
    epoch, previous, state = reader.int32(), reader.int32(), reader.int8()
    try:
        member_state = MemberState(state)
    except ValueError:
        raise InvalidRecord(f"unknown member state {state}") from None
    value = CurrentAssignment(
        epoch, previous, member_state, _read_partitions(reader), _read_partitions(reader)
    )
    return _finish(reader, value)


def _value_reader(data: bytes) -> Reader:
    reader = Reader(data, flexible=False)
    version = reader.int16()
    if version != _VALUE_VERSION:
        raise InvalidRecord(f"unknown consumer group record version {version}")
    reader.flexible = True
    return reader


def _finish(reader: Reader, value: T) -> T:
    reader.end_struct()
    reader.finish()
    return value


def _read_partitions(reader: Reader) -> Partitions:
    partitions = set()
    for _ in range(reader.array_length()):
        topic_id = reader.uuid()
        partitions.update((topic_id, reader.int32()) for _ in range(reader.array_length()))
        reader.end_struct()  # skips AssignmentEpochs (tag 0, KIP-1251)
    return frozenset(partitions)
