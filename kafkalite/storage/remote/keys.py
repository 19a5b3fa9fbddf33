"""Object keys of a remote segment: Aiven's layout for tiered storage, Kafka's suffixes.

    <prefix><topic>-<topic id>/<partition>/<20-digit base offset>-<segment id><suffix>

Ids are Kafka's Uuid strings (URL-safe base64, no padding). One object per file, with the
suffixes of Kafka's LocalTieredStorage: `.log`, `.index`, `.timeindex`, `.txnindex` (only
when the segment has aborted transactions), `.snapshot` (the producer snapshot at the
segment's end, when the broker still has it) and `.leader_epoch_checkpoint`.
"""

from __future__ import annotations

import base64
import uuid

LOG = ".log"
OFFSET_INDEX = ".index"
TIME_INDEX = ".timeindex"
TXN_INDEX = ".txnindex"
PRODUCER_SNAPSHOT = ".snapshot"
LEADER_EPOCH = ".leader_epoch_checkpoint"


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def partition_prefix(prefix: str, topic: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{prefix}{topic}-{kafka_uuid(topic_id)}/{partition}/"


def object_key(
    prefix: str,
    topic: str,
    topic_id: uuid.UUID,
    partition: int,
    base_offset: int,
    segment_id: uuid.UUID,
    suffix: str,
) -> str:
    stem = f"{base_offset:020d}-{kafka_uuid(segment_id)}"
    return partition_prefix(prefix, topic, topic_id, partition) + stem + suffix
