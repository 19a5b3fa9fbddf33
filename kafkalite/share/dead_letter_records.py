"""The records of a share group's dead-letter topic (KIP-1191; Kafka's
ShareGroupDLQStateManager.ProduceRequestHandler), sans-IO: one per source offset, stamped with
the write's time, carrying Kafka's six `__dlq.errors.*` headers in its order (topic,
partition, offset, group, delivery count, the cause's message) and, when the group copies
records, the source's key and value (not its headers, as Kafka); packed in batches within
the dead-letter topic's `max.message.bytes`, as Kafka sends a range in several rounds. And
the reverse: which source offsets dead-letter records stand for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kafkalite.share.share_partition import DeadLetter
from kafkalite.storage.records import Record, encode_record_batch

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"


@dataclass(frozen=True, slots=True)
class DeadLetterSource:
    """The share-partition the dead letters come from."""

    group_id: str
    topic: str
    partition: int


def dead_letter_records(
    source: DeadLetterSource,
    dead_letters: Sequence[DeadLetter],
    contents: dict[int, Record],
    now_ms: int,
) -> list[Record]:
    """One record per dead letter (offsets from 0, the log assigns them), as Kafka's
    ProduceRequestHandler.topicProduceData builds them."""
    records = []
    for delta, dead in enumerate(dead_letters):
        original = contents.get(dead.offset)
        headers = (
            (HEADER_TOPIC, source.topic.encode()),
            (HEADER_PARTITION, str(source.partition).encode()),
            (HEADER_OFFSET, str(dead.offset).encode()),
            (HEADER_GROUP, source.group_id.encode()),
            (HEADER_DELIVERY_COUNT, str(dead.delivery_count).encode()),
            (HEADER_MESSAGE, dead.cause.encode()),
        )
        key = original.key if original is not None else None
        value = original.value if original is not None else None
        records.append(Record(delta, now_ms, key, value, headers))
    return records


def source_offsets(source: DeadLetterSource, records: Sequence[Record]) -> set[int]:
    """The offsets of `source` these dead-letter records stand for."""
    expected = (source.topic.encode(), str(source.partition).encode(), source.group_id.encode())
    found = set()
    for record in records:
        headers = dict(record.headers)
        named = tuple(headers.get(h) for h in (HEADER_TOPIC, HEADER_PARTITION, HEADER_GROUP))
        offset = headers.get(HEADER_OFFSET)
        if named == expected and offset is not None and offset.isdigit():
            found.add(int(offset))
    return found


# A batch's framing; a record's length, attributes, timestamp and offset deltas (all its
# records have the batch's timestamp) and header count, at most.
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 11


def encode_rounds(records: Sequence[Record], max_message_bytes: int, now_ms: int) -> bytes:
    """The records as batches of at most `max_message_bytes` each (a record too large on its
    own goes alone, and the log refuses it), as Kafka sends a range in several rounds."""
    batches: list[bytes] = []
    chunk: list[Record] = []
    size = BATCH_OVERHEAD
    for record in records:
        record_size = _estimated_size(record)
        if chunk and size + record_size > max_message_bytes:
            batches.append(_encode(chunk, now_ms))
            chunk, size = [], BATCH_OVERHEAD
        chunk.append(record)
        size += record_size
    if chunk:
        batches.append(_encode(chunk, now_ms))
    return b"".join(batches)


def _estimated_size(record: Record) -> int:
    """At least the record's encoded size."""
    fields = [record.key, record.value]
    for name, value in record.headers:
        fields += [name.encode(), value]
    return RECORD_OVERHEAD + sum(_bytes_size(field) for field in fields)


def _bytes_size(data: bytes | None) -> int:
    """A nullable byte string's encoded size: its zigzag varint length, then the bytes."""
    length = -1 if data is None else len(data)
    zigzag = (length << 1) ^ (length >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7) + (len(data) if data else 0)


def _encode(chunk: Sequence[Record], now_ms: int) -> bytes:
    numbered = [replace(record, offset=delta) for delta, record in enumerate(chunk)]
    return encode_record_batch(numbered, base_offset=0, base_timestamp=now_ms, max_timestamp=now_ms)
