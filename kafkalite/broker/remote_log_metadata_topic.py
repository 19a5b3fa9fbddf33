"""The records of the `__remote_log_metadata` topic (Kafka's TopicBasedRemoteLogMetadataManager):
which of its partitions holds a user partition's remote segment list, and the records'
encoding. Sans-IO: remote_log_metadata_manager.py produces and consumes them.

A record's key is the user partition (`<topic id hex>:<partition>`), its value one JSON
record of storage/remote/metadata.py (the events of Kafka's RemoteLogSegmentMetadataRecord
and RemoteLogSegmentMetadataUpdateRecord, and the remote log start) with the topic id and
partition added; the leader stamps each with its leader epoch (`leader_epoch`), by which the
replay fences a deposed leader's late records. The values are kafkalite's JSON, not Kafka's
binary serde: the topic is read by kafkalite brokers only.
"""

from __future__ import annotations

import json
import uuid

from kafkalite.broker.retry_topics import murmur2

METADATA_TOPIC = "__remote_log_metadata"
UserPartition = tuple[uuid.UUID, int]  # Kafka's TopicIdPartition


def _java_long_hash(value: int) -> int:
    """Java's Long.hashCode of a signed 64-bit value, as a signed 32-bit int."""
    value &= 0xFFFFFFFFFFFFFFFF
    return _int32((value ^ (value >> 32)) & 0xFFFFFFFF)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def metadata_partition(user: UserPartition, num_partitions: int) -> int:
    """Kafka's RemoteLogMetadataTopicPartitioner.metadataPartition: murmur2 of the 4 bytes of
    Objects.hash(topicId lsb, topicId msb, partition), made positive, modulo the count."""
    topic_id, partition = user
    msb, lsb = topic_id.int >> 64, topic_id.int & 0xFFFFFFFFFFFFFFFF
    signed = [v - (1 << 64) if v >= 1 << 63 else v for v in (lsb, msb)]
    hash_ = 1
    for element in (_java_long_hash(signed[0]), _java_long_hash(signed[1]), partition):
        hash_ = _int32(31 * hash_ + element)
    data = (hash_ & 0xFFFFFFFF).to_bytes(4, "big")
    return (murmur2(data) & 0x7FFFFFFF) % num_partitions


def encode(user: UserPartition, record: dict[str, object]) -> tuple[bytes, bytes]:
    topic_id, partition = user
    value = {**record, "topic_id": topic_id.hex, "partition": partition}
    return f"{topic_id.hex}:{partition}".encode(), json.dumps(value).encode()


def decode(value: bytes) -> tuple[UserPartition, dict[str, object]] | None:
    """The user partition and its record; None for a value this version does not read."""
    try:
        record = json.loads(value)
        user = (uuid.UUID(hex=record.pop("topic_id")), int(record.pop("partition")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return user, record
