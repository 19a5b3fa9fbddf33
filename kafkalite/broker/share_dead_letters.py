"""Dead-letter topics of share groups (KIP-1191; Kafka's ShareGroupDLQStateManager): a record
a share group gave up on (REJECTed, or at the delivery count limit) is written to the
group's `errors.deadletterqueue.topic.name` before its ARCHIVED state is persisted.

Kafka's rules, checked at each write (the configs are dynamic), with its messages:
the name is not blank and does not start with `__`; an existing topic has
`errors.deadletterqueue.group.enable=true`; a missing one is created only under the broker's
`errors.deadletterqueue.auto.create.topics.enable` (with `errors.deadletterqueue.group.enable`
and `message.timestamp.type=CreateTime`); the name starts with the broker's
`errors.deadletterqueue.topic.name.prefix` (default `dlq.`) unless that is empty.

The records (share/dead_letter_records.py) go to the dead-letter partition `source partition
% its partition count`; the source log is read for their key and value only under the
group's `errors.deadletterqueue.copy.record.enable`. Writes go through the ReplicaManager's
append with acks=all; a refused or failed write is logged and the records archived anyway,
as Kafka does once its retries are spent.

What is guaranteed (with broker/share_partition_manager.py, as Kafka 4.4): a record given
up on is committed ARCHIVING before its acknowledgement is answered, so it is never
delivered again; its dead letter is then written and committed before the record is
committed ARCHIVED, so a broker that stops in between writes it again after its restart
(nothing lost). Where Kafka may then write it twice, the dead-letter partition is read once
for a share-partition loaded with ARCHIVING records, from its last state write on
(`written_since`), and a dead letter found there is not written again. Duplicates remain
possible only if the wall clock stepped back by more than a second across the crash.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.group_configs import ShareGroupSettings
from kafkalite.broker.topic_config import effective_value
from kafkalite.share.dead_letter_records import (
    DeadLetterSource,
    dead_letter_records,
    encode_rounds,
    source_offsets,
)
from kafkalite.share.share_partition import DeadLetter
from kafkalite.storage.batch import iter_batches
from kafkalite.storage.records import Record, decode_records

if TYPE_CHECKING:
    from kafkalite.broker.replica_manager import ReplicaManager

log = logging.getLogger("kafkalite.share")


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
            view, start = memoryview(result.records), offset
            for position, header in iter_batches(view):
                offset = max(offset, header.last_offset + 1)
                if not header.is_control:
                    batch = view[position : position + header.size]
                    found.update(source_offsets(source, decode_records(batch)))
            if offset == start:  # no whole batch read
                break
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
