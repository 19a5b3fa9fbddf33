"""The records of `__share_group_state`, byte-exact with Kafka 4.4's
share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json
(checked against the bytes Kafka 4.4's generated classes write: test_share_session_and_records).

Keys: int16 record type (0 ShareSnapshot, 1 ShareUpdate), then {GroupId, TopicId,
Partition} (non-flexible). Values: int16 version 0, then a flexible struct:

  ShareSnapshotValue {SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, CreateTimestamp,
                      WriteTimestamp,
                      StateBatches[FirstOffset, LastOffset, DeliveryState, DeliveryCount]}
  ShareUpdateValue   {SnapshotEpoch, LeaderEpoch, StartOffset (-1: unchanged),
                      StateBatches[...]}

Tagged fields (tag 0, KIP-1226's DeliveryCompleteCount) are not written and skipped on read.
A snapshot replaces a share-partition's state; an update overlays its batches on it (Kafka's
ShareCoordinatorShard combines them the same way: later batches win offset by offset).
"""

from __future__ import annotations

import base64
import binascii
import heapq
import uuid
from dataclasses import dataclass

from kafkalite.coordinator.records import InvalidRecord, Reader, Writer
from kafkalite.share.share_partition import RecordState, StateBatch

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
_VALUE_VERSION = 0
_DELIVERY_COMPLETE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's SharePartitionKey.asCoordinatorKey, "group:topicId:partition" with the
        topic id as Kafka prints a Uuid (URL-safe base64): what picks the state partition."""
        return f"{self.group_id}:{kafka_uuid(self.topic_id)}:{self.partition}"

    @classmethod
    def parse(cls, key: str) -> SharePartitionKey | None:
        """A FindCoordinator SHARE key, or None when it is not "group:topicId:partition"."""
        group_id, _, rest = key.rpartition(":")
        group_id, _, topic = group_id.rpartition(":")
        try:
            topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(topic + "=="))
            partition = int(rest)
        except (ValueError, binascii.Error):
            return None
        if not group_id or len(topic) != 22 or partition < 0:
            return None
        return cls(group_id, topic_id, partition)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: the 16 bytes in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's persisted state (ShareSnapshotValue)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = -1
    write_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    writer = Writer(flexible=False)
    writer.int16(record_type)
    writer.string(key.group_id)
    writer.uuid(key.topic_id)
    writer.int32(key.partition)
    return writer.getvalue()


def decode_key(data: bytes) -> tuple[int, SharePartitionKey]:
    reader = Reader(data, flexible=False)
    record_type = reader.int16()
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise InvalidRecord(f"unknown share state record type {record_type}")
    key = SharePartitionKey(reader.string(), reader.uuid(), reader.int32())
    reader.finish()
    return record_type, key


def snapshot_record(key: SharePartitionKey, state: ShareState) -> tuple[bytes, bytes]:
    writer = _value_writer()
    writer.int32(state.snapshot_epoch)
    writer.int32(state.state_epoch)
    writer.int32(state.leader_epoch)
    writer.int64(state.start_offset)
    writer.int64(state.create_timestamp)
    writer.int64(state.write_timestamp)
    _write_batches(writer, state.batches)
    writer.end_struct()
    return encode_key(SHARE_SNAPSHOT, key), writer.getvalue()


def update_record(key: SharePartitionKey, update: ShareUpdate) -> tuple[bytes, bytes]:
    writer = _value_writer()
    writer.int32(update.snapshot_epoch)
    writer.int32(update.leader_epoch)
    writer.int64(update.start_offset)
    _write_batches(writer, update.batches)
    writer.end_struct()
    return encode_key(SHARE_UPDATE, key), writer.getvalue()


def decode_snapshot(data: bytes) -> ShareState:
    reader = _value_reader(data)
    state = ShareState(
        snapshot_epoch=reader.int32(),
        state_epoch=reader.int32(),
        leader_epoch=reader.int32(),
        start_offset=reader.int64(),
        create_timestamp=reader.int64(),
        write_timestamp=reader.int64(),
        batches=_read_batches(reader),
    )
    reader.end_struct()
    reader.finish()
    return state


def decode_update(data: bytes) -> ShareUpdate:
    reader = _value_reader(data)
    update = ShareUpdate(
        snapshot_epoch=reader.int32(),
        leader_epoch=reader.int32(),
        start_offset=reader.int64(),
        batches=_read_batches(reader),
    )
    reader.end_struct()
    reader.finish()
    return update


def apply_update(state: ShareState, update: ShareUpdate) -> ShareState:
    """The state with an update overlaid: its batches win offset by offset, and offsets
    below the start offset are dropped."""
    start = update.start_offset if update.start_offset >= 0 else state.start_offset
    merged = _overlay([*state.batches, *update.batches], start)
    return ShareState(
        state.snapshot_epoch,
        state.state_epoch,
        update.leader_epoch,
        start,
        tuple(merged),
        state.create_timestamp,
        state.write_timestamp,
    )


def _overlay(batches: list[StateBatch], start: int) -> list[StateBatch]:
    """The batches painted in order (a later one wins where they overlap), from `start` on,
    adjacent equal runs joined. Works on ranges, never offset by offset: a batch may span
    any number of offsets (a sweep over the batches' bounds, the latest covering wins)."""
    clipped = [
        (max(b.first_offset, start), b.last_offset, order, b)
        for order, b in enumerate(batches)
        if b.last_offset >= max(b.first_offset, start)
    ]
    bounds = sorted({first for first, _, _, _ in clipped} | {last + 1 for _, last, _, _ in clipped})
    by_first = sorted(clipped, key=lambda c: c[0])
    covering: list[tuple[int, int, StateBatch]] = []  # (-order, last, batch): latest on top
    merged: list[StateBatch] = []
    taken = 0
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        while taken < len(by_first) and by_first[taken][0] <= lo:
            first, last, order, batch = by_first[taken]
            heapq.heappush(covering, (-order, last, batch))
            taken += 1
        while covering and covering[0][1] < lo:  # ended before this run
            heapq.heappop(covering)
        if not covering:
            continue
        batch = covering[0][2]
        value = (batch.delivery_state, batch.delivery_count)
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and previous.last_offset == lo - 1
            and (previous.delivery_state, previous.delivery_count) == value
        ):
            merged[-1] = StateBatch(previous.first_offset, hi - 1, *value)
        else:
            merged.append(StateBatch(lo, hi - 1, *value))
    return merged


def delivery_complete_count(state: ShareState) -> int:
    """The records above the start offset delivered for good, acknowledged or archived
    (KIP-1226's DeliveryCompleteCount): the lag leaves them out."""
    return sum(
        batch.last_offset - max(batch.first_offset, state.start_offset) + 1
        for batch in state.batches
        if batch.delivery_state in _DELIVERY_COMPLETE and batch.last_offset >= state.start_offset
    )


def _value_writer() -> Writer:
    writer = Writer(flexible=True)
    writer.int16(_VALUE_VERSION)
    return writer


def _value_reader(data: bytes) -> Reader:
    reader = Reader(data, flexible=False)
    version = reader.int16()
    if version != _VALUE_VERSION:
        raise InvalidRecord(f"unknown share state record version {version}")
    reader.flexible = True
    return reader


def _write_batches(writer: Writer, batches: tuple[StateBatch, ...]) -> None:
    writer.array_length(len(batches))
    for batch in batches:
        writer.int64(batch.first_offset)
        writer.int64(batch.last_offset)
        writer.int8(batch.delivery_state)
        writer.int16(batch.delivery_count)
        writer.end_struct()


def _read_batches(reader: Reader) -> tuple[StateBatch, ...]:
    batches = []
    for _ in range(reader.array_length()):
        batches.append(StateBatch(reader.int64(), reader.int64(), reader.int8(), reader.int16()))
        reader.end_struct()
    return tuple(batches)
