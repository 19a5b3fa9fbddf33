"""Dead-letter topics of share groups (KIP-1191; Kafka's ShareGroupDLQStateManager): a record
a share group gave up on (REJECTed, or at the delivery count limit) is written to the
group's `errors.deadletterqueue.topic.name` before its ARCHIVED state is persisted.

Kafka's rules, checked at each write (the configs are dynamic), with its messages:
the name is not blank and does not start with `__`; an existing topic has
`errors.deadletterqueue.group.enable=true`; a missing one is created only under the broker's
`errors.deadletterqueue.auto.create.topics.enable` (with `errors.deadletterqueue.group.enable`
and `message.timestamp.type=CreateTime`); the name starts with the broker's
`errors.deadletterqueue.topic.name.prefix` (default `dlq.`) unless that is empty.

One record per offset goes to the dead-letter partition `source partition % its partition
count`, stamped with the write's wall-clock time, with Kafka's six `__dlq.errors.*` headers
(topic, partition, offset, group, delivery count, the cause's message) and, under the group's
`errors.deadletterqueue.copy.record.enable`, the source record's key and value (as Kafka,
not its headers), in batches within the dead-letter topic's `max.message.bytes`. The
source log is read only then. Writes go through the ReplicaManager's
append with acks=all; a refused or failed write is logged and the records archived anyway,
as Kafka does once its retries are spent.

What is guaranteed (with broker/share_partition_manager.py, as Kafka 4.4): a record given
up on is committed ARCHIVING before its acknowledgement is answered, so it is never
delivered again; its dead letter is then written and committed before the record is
committed ARCHIVED, so a broker that stops in between writes it again after its restart
(nothing lost). Where Kafka may then write it twice, the dead-letter partition is read once,
from the share-partition's last state write on (`written_since`), and a dead letter found
there is not written again. Duplicates remain possible only if the wall clock stepped back
by more than a second across the crash, or (in a cluster, later) the dead-letter partition's
leader lost the record.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.group_configs import ShareGroupSettings
from kafkalite.broker.topic_config import effective_value
from kafkalite.share.share_partition import DeadLetter
from kafkalite.storage.batch import iter_batches
from kafkalite.storage.records import Record, decode_records, encode_record_batch

if TYPE_CHECKING:
    from kafkalite.broker.replica_manager import ReplicaManager

log = logging.getLogger("kafkalite.share")

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

GROUP_ENABLE = "errors.deadletterqueue.group.enable"
TOPIC_NAME_PREFIX = "errors.deadletterqueue.topic.name.prefix"
AUTO_CREATE_TOPICS_ENABLE = "errors.deadletterqueue.auto.create.topics.enable"

# Kafka's DLQ_MAX_FETCH_BYTES: dead letters are mostly single offsets.
READ_BYTES = 1 << 20
# The most of a dead-letter partition read to find what a crash left behind, and the slack
# for the clock's steps between a state write and a dead letter.
SCAN_BYTES = 64 << 20
SCAN_SLACK_MS = 1000
# Kafka's MAX_REQUEST_ATTEMPTS; a short pause between (a topic just created).
ATTEMPTS = 5
BACKOFF_S = 0.2
RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.request_timed_out,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
    }
)


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


def _source_offsets(source: DeadLetterSource, records: Sequence[Record]) -> set[int]:
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


@dataclass
class DeadLetterCounts:
    """Kafka's ShareGroupMetrics meters of one group: DeadLetterQueueRecordCount (records
    written), DeadLetterQueueTotalProduceRequestsPerSec (appends tried) and
    DeadLetterQueueFailedProduceRequestsPerSec (writes that failed in the end)."""

    records: int = 0
    produce_requests: int = 0
    failed_produce_requests: int = 0


@dataclass(eq=False)
class DeadLetterWriter:
    replica_manager: ReplicaManager
    counts: dict[str, DeadLetterCounts] = field(default_factory=dict)

    def refusal(self, group_id: str, dlq_topic: str) -> str | None:
        """Why the group's dead-letter topic cannot be written (Kafka's validateDlqTopic)."""
        config = self.replica_manager.config
        topic = self.replica_manager.metadata.topics.get(dlq_topic)
        if not dlq_topic:
            return f"Configured DLQ topic name in share group: {group_id} is empty."
        if dlq_topic.startswith("__"):
            return (
                f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
                f"topic: {dlq_topic}."
            )
        if topic is not None and effective_value(config, topic.configs, GROUP_ENABLE)[0] != "true":
            return (
                f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
                f"topic: {dlq_topic}."
            )
        if topic is None and not config.bool(AUTO_CREATE_TOPICS_ENABLE):
            return (
                "DLQ topic does not exist and auto create is disabled on cluster for share "
                f"group: {group_id}, topic: {dlq_topic}."
            )
        prefix = config.str(TOPIC_NAME_PREFIX) or ""
        if prefix and not dlq_topic.startswith(prefix):
            return (
                "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
                f"group: {group_id}, topic: {dlq_topic}, prefix: {prefix}."
            )
        return None

    async def write(
        self,
        source: DeadLetterSource,
        settings: ShareGroupSettings,
        dead_letters: Sequence[DeadLetter],
    ) -> ErrorCode:
        """Write the dead letters, NONE once committed (acks=all). Any other answer: they
        were not written, and never will be (logged)."""
        refusal = self.refusal(source.group_id, settings.dlq_topic)
        if refusal is not None:
            log.warning("dead letters of %s dropped: %s", source, refusal)
            return ErrorCode.invalid_config
        contents = self._contents(source, dead_letters) if settings.dlq_copy_record else {}
        counts = self.counts.setdefault(source.group_id, DeadLetterCounts())
        error = ErrorCode.none
        for attempt in range(ATTEMPTS):
            if attempt:
                await trio.sleep(BACKOFF_S)
            counts.produce_requests += 1
            error = await self._append(source, settings.dlq_topic, dead_letters, contents)
            if error not in RETRIABLE:
                break
        if error is not ErrorCode.none:
            counts.failed_produce_requests += 1
            log.warning("cannot write dead letters of %s: %s", source, error.name)
        else:
            counts.records += len(dead_letters)
        return error

    async def _append(
        self,
        source: DeadLetterSource,
        dlq_topic: str,
        dead_letters: Sequence[DeadLetter],
        contents: dict[int, Record],
    ) -> ErrorCode:
        manager = self.replica_manager
        topic = manager.metadata.topics.get(dlq_topic)
        if topic is None:
            outcome, topic = manager.create_topic(
                dlq_topic, configs={GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"}
            )
            if not outcome.ok and outcome.error is not ErrorCode.topic_already_exists:
                return outcome.error
            topic = manager.metadata.topics.get(dlq_topic)
            if topic is None:
                return ErrorCode.unknown_topic_or_partition
            log.info("created dead-letter topic %s", dlq_topic)
        tp = (dlq_topic, source.partition % topic.num_partitions)
        now_ms = manager.clock_ms()
        records = dead_letter_records(source, dead_letters, contents, now_ms)
        limit = int(effective_value(manager.config, topic.configs, "max.message.bytes")[0])
        results, delayed = manager.append_records({tp: encode_rounds(records, limit, now_ms)}, -1)
        if delayed is not None:
            timeout = manager.config.int("request.timeout.ms")
            await complete_or_expire(manager.produce_purgatory, delayed, timeout)
            return delayed.statuses[tp].result.error
        return results[tp].error

    async def written_since(
        self, source: DeadLetterSource, dlq_topic: str, since_ms: int
    ) -> set[int]:
        """The source offsets with a dead-letter record written at `since_ms` or later (the
        share-partition's last state write: a crash may have left them unarchived)."""
        manager = self.replica_manager
        topic = manager.metadata.topics.get(dlq_topic)
        partition = (
            manager.partition(dlq_topic, source.partition % topic.num_partitions)
            if topic is not None
            else None
        )
        if partition is None or not partition.is_leader:
            return set()
        error, (offset, _, _) = partition.fetch_offset_for_timestamp(
            since_ms - SCAN_SLACK_MS, from_client=False
        )
        found: set[int] = set()
        scanned = 0
        while error is ErrorCode.none and 0 <= offset < partition.high_watermark:
            if scanned >= SCAN_BYTES:
                log.warning("dead letters of %s: stopped looking for duplicates", source)
                break
            result = partition.fetch_records(offset, READ_BYTES)
            if result.error is not ErrorCode.none or not result.records:
                break
            scanned += len(result.records)
            view = memoryview(result.records)
            for position, header in iter_batches(view):
                offset = max(offset, header.last_offset + 1)
                if not header.is_control:
                    batch = view[position : position + header.size]
                    found.update(_source_offsets(source, decode_records(batch)))
            await trio.sleep(0)  # a long read does not hold up the broker
        return found

    def _contents(
        self, source: DeadLetterSource, dead_letters: Sequence[DeadLetter]
    ) -> dict[int, Record]:
        """The source records of the dead letters (those the log still holds)."""
        partition = self.replica_manager.partition(source.topic, source.partition)
        wanted = {d.offset for d in dead_letters}
        found: dict[int, Record] = {}
        offset = min(wanted)
        while partition is not None and offset <= max(wanted):
            result = partition.fetch_records(offset, READ_BYTES)
            if result.error is not ErrorCode.none or not result.records:
                break
            view = memoryview(result.records)
            next_offset = offset
            for position, header in iter_batches(view):
                next_offset = header.last_offset + 1
                if header.is_control or header.last_offset < offset:
                    continue
                for record in decode_records(view[position : position + header.size]):
                    if record.offset in wanted:
                        found[record.offset] = record
            if next_offset <= offset:
                break
            offset = min((o for o in wanted if o >= next_offset), default=next_offset)
        return found
