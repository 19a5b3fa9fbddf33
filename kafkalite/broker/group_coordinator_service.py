"""The trio side of the group coordinator: parked requests, timers and durable offsets.

The sans-IO `GroupCoordinator` decides everything. Handlers reach it only through `call`
(or `join_group` / `sync_group` / `commit_offsets`, built on the same path), so whatever a
call changes is persisted and announced without each handler remembering to. This layer
* parks JoinGroup/SyncGroup callers until their `Completion` arrives,
* runs one timer task that ticks the coordinator at its next deadline (and expires
  offsets every offsets.retention.check.interval.ms),
* persists every offset change in `__consumer_offsets` (compacted, partition = hash of the
  group id) before the request that caused it is answered, and replays that topic on start.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    Ticket,
    consumer_group_records,
    group_partition,
)
from kafkalite.coordinator.consumer_group import TopicInfo
from kafkalite.coordinator.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkalite.coordinator.consumer_group_records import ConsumerGroupRecord
from kafkalite.coordinator.group_snapshot import GroupChange
from kafkalite.coordinator.offsets import OffsetChange, TopicPartition
from kafkalite.coordinator.records import (
    GroupMetadataKey,
    InvalidRecord,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
)
from kafkalite.storage.batch import TRANSACTIONAL_FLAG, BatchHeader, iter_batches
from kafkalite.storage.control_batch import decode_marker
from kafkalite.storage.log import UnifiedLog
from kafkalite.storage.records import Record, decode_records, encode_batch

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.config import BrokerConfig

log = logging.getLogger("kafkalite.groups")

Change = OffsetChange | GroupChange | ConsumerGroupRecord
T = TypeVar("T")
LOAD_CHUNK_BYTES = 1024 * 1024

# What a failed `__consumer_offsets` append means to a committer (Kafka's
# CoordinatorRuntime / GroupCoordinatorService error normalisation).
_APPEND_ERRORS = {
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


def group_config_from(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
        max_size=config.int("group.max.size"),
        initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
        offset_metadata_max_bytes=config.int("offset.metadata.max.bytes"),
        consumer_session_timeout_ms=config.int("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=config.int("group.consumer.heartbeat.interval.ms"),
        consumer_max_size=config.int("group.consumer.max.size"),
        consumer_assignors=config.consumer_assignors,
    )


def offsets_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """Kafka's fixed settings of `__consumer_offsets` (groupMetadataTopicConfigs)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.int("offsets.topic.segment.bytes")),
    }


@dataclass(eq=False)
class _Waiter:
    done: trio.Event = field(default_factory=trio.Event)
    response: JoinGroupResponse | SyncGroupResponse | None = None


@dataclass(eq=False)
class GroupCoordinatorService:
    config: BrokerConfig
    replica_manager: ReplicaManager
    coordinator: GroupCoordinator = field(init=False)
    _waiters: dict[int, _Waiter] = field(default_factory=dict)
    _wake_timers: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(group_config_from(self.config))

    def now_ms(self) -> int:
        return self.replica_manager.clock_ms()

    # -- startup ---------------------------------------------------------------------------

    def load(self) -> None:
        """Replay `__consumer_offsets`, if it exists, into the coordinator."""
        topic = self.replica_manager.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return
        loaded = 0
        for partition in topic.partitions.values():
            loaded += self._load_partition(partition)
        log.info("loaded %d record(s) from %s", loaded, OFFSETS_TOPIC)

    def _load_partition(self, partition: Partition) -> int:
        """Replay one partition. Transactional offset commits wait for their marker: a
        commit applies them, an abort drops them; those still open at the end stay pending
        in the coordinator (their transaction ends later)."""
        now, loaded = self.now_ms(), 0
        open_txns: dict[int, list[Record]] = defaultdict(list)
        for header, batch in log_batches(partition.log):
            if header.is_control:
                marker = decode_marker(batch) if header.is_transactional else None
                held = open_txns.pop(header.producer_id, [])
                if marker is not None and marker.commit:
                    loaded += self._replay_records(held, now)
            elif header.is_transactional:
                open_txns[header.producer_id].extend(decode_records(batch))
            else:
                loaded += self._replay_records(decode_records(batch), now)
        for producer_id, records in open_txns.items():
            for record in records:
                self._load_pending(producer_id, record)
        return loaded

    def _replay_records(self, records: Iterable[Record], now_ms: int) -> int:
        loaded = 0
        for record in records:
            try:
                loaded += self._replay(record.key, record.value, now_ms)
            except InvalidRecord as exc:
                log.warning("skipping %s record at %d: %s", OFFSETS_TOPIC, record.offset, exc)
        return loaded

    def _load_pending(self, producer_id: int, record: Record) -> None:
        try:
            decoded = decode_key(record.key) if record.key is not None else None
            if isinstance(decoded, OffsetCommitKey) and record.value is not None:
                value = decode_offset_commit_value(record.value)
                tp = TopicPartition(decoded.topic, decoded.partition)
                self.coordinator.load_pending_txn_offset(decoded.group_id, producer_id, tp, value)
        except InvalidRecord as exc:
            log.warning("skipping %s record at %d: %s", OFFSETS_TOPIC, record.offset, exc)

    def append_txn_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, commits: list[OffsetChange]
    ) -> ErrorCode:
        """TxnOffsetCommit: the offsets written to the group's partition as a transactional
        batch of the producer (Kafka's coordinator-origin append; no sequence numbers), so a
        restart holds them pending until the transaction's marker."""
        if self.ensure_offsets_topic() is not ErrorCode.none:
            return ErrorCode.coordinator_not_available
        topic = self.replica_manager.topics[OFFSETS_TOPIC]
        index = group_partition(group_id, topic.metadata.num_partitions)
        partition = topic.partitions.get(index)
        if partition is None:
            return ErrorCode.not_coordinator
        batch = encode_batch(
            [_record(change) for change in commits],
            timestamp=self.now_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            attributes=TRANSACTIONAL_FLAG,
        )
        tp = (partition.topic, partition.index)
        results, _ = self.replica_manager.append_records(
            {tp: batch}, 1, internal_topics_allowed=True, coordinator=True
        )
        error = results[tp].error
        if error is ErrorCode.none:
            return error
        if error is ErrorCode.invalid_producer_epoch:
            return ErrorCode.producer_fenced
        return _APPEND_ERRORS.get(error, ErrorCode.unknown_server_error)

    def _replay(self, key: bytes | None, value: bytes | None, now_ms: int) -> int:
        if key is None:
            return 0
        decoded = decode_key(key)
        if isinstance(decoded, OffsetCommitKey):
            tp = TopicPartition(decoded.topic, decoded.partition)
            offset = None if value is None else decode_offset_commit_value(value)
            self.coordinator.load_offset(decoded.group_id, tp, offset, now_ms)
            return 1
        if isinstance(decoded, GroupMetadataKey):
            group = None if value is None else decode_group_metadata_value(value)
            self.coordinator.load_group(decoded.group_id, group, now_ms)
            return 1
        consumer_key = consumer_group_records.decode_key(key)
        if consumer_key is not None:
            self.coordinator.load_consumer_group_record(consumer_key, value, now_ms)
            return 1
        return 0  # a record type of Kafka's share or streams groups

    # -- partitions of __consumer_offsets --------------------------------------------------

    def ensure_offsets_topic(self) -> ErrorCode:
        """Create `__consumer_offsets` on first use, as Kafka does."""
        if OFFSETS_TOPIC in self.replica_manager.topics:
            return ErrorCode.none
        outcome, _ = self.replica_manager.create_topic(
            OFFSETS_TOPIC,
            self.config.int("offsets.topic.num.partitions"),
            self.config.int("offsets.topic.replication.factor"),
            offsets_topic_configs(self.config),
        )
        if not outcome.ok:
            log.error("cannot create %s: %s", OFFSETS_TOPIC, outcome.message)
            return ErrorCode.coordinator_not_available
        log.info("created %s", OFFSETS_TOPIC)
        return ErrorCode.none

    def _persist(self) -> dict[str, ErrorCode]:
        """Append the queued offset changes; returns the groups whose append failed."""
        changes = self.coordinator.take_changes()
        if not changes:
            return {}
        if self.ensure_offsets_topic() is not ErrorCode.none:
            return {c.group_id: ErrorCode.coordinator_not_available for c in changes}
        topic = self.replica_manager.topics[OFFSETS_TOPIC]
        partitions, count = topic.partitions, topic.metadata.num_partitions
        by_partition: dict[int, list[Change]] = defaultdict(list)
        for change in changes:
            by_partition[group_partition(change.group_id, count)].append(change)
        failed: dict[str, ErrorCode] = {}
        for index, batch_changes in by_partition.items():
            partition = partitions.get(index)
            error = (
                self._append(partition, batch_changes)
                if partition is not None
                else ErrorCode.not_coordinator
            )
            if error is not ErrorCode.none:
                failed.update((c.group_id, error) for c in batch_changes)
        return failed

    def _append(self, partition: Partition, changes: list[Change]) -> ErrorCode:
        records = [_record(change) for change in changes]
        batch = encode_batch(records, timestamp=self.now_ms())
        # acks=1: on a single node the high watermark covers the append at once.
        results, _ = self.replica_manager.append_records(
            {(partition.topic, partition.index): batch}, 1, internal_topics_allowed=True
        )
        result = results[(partition.topic, partition.index)]
        if result.error is not ErrorCode.none:
            log.error("cannot persist %d offset change(s): %s", len(changes), result.error.name)
            return _APPEND_ERRORS.get(result.error, ErrorCode.unknown_server_error)
        return ErrorCode.none

    # -- requests --------------------------------------------------------------------------

    def call(
        self, operation: Callable[[GroupCoordinator, int], T]
    ) -> tuple[T, dict[str, ErrorCode]]:
        """The one way into the coordinator: run `operation(coordinator, now_ms)`, then persist
        what it changed, answer parked callers and re-arm the timers. Returns its result and
        the groups whose changes could not be persisted (with the error to answer)."""
        result = operation(self.coordinator, self.now_ms())
        return result, self._after_call()

    async def join_group(self, request: JoinGroupRequest) -> JoinGroupResponse:
        response = await self._park(lambda c, now: c.join_group(request, now))
        assert isinstance(response, JoinGroupResponse)
        return response

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        response = await self._park(lambda c, now: c.sync_group(request, now))
        assert isinstance(response, SyncGroupResponse)
        return response

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        """KIP-848: the one entry of ConsumerGroupHeartbeat into the coordinator."""
        topics = _TopicsView(self.replica_manager)
        response, not_persisted = self.call(
            lambda c, now: c.consumer_group_heartbeat(request, topics, now)
        )
        failed = not_persisted.get(request.group_id)
        if failed is None:
            return response
        return ConsumerGroupHeartbeatResponse(failed)

    def commit_offsets(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        response, not_persisted = self.call(lambda c, now: c.commit_offsets(request, now))
        failed = not_persisted.get(request.group_id)
        if failed is None:
            return response
        return OffsetCommitResponse(
            tuple(
                replace(p, error=failed) if p.error is ErrorCode.none else p
                for p in response.partitions
            )
        )

    def _after_call(self) -> dict[str, ErrorCode]:
        """Persist, answer parked callers, re-arm timers (after every coordinator call)."""
        failed = self._persist()
        for completion in self.coordinator.take_completions():
            waiter = self._waiters.pop(completion.ticket.id, None)
            if waiter is not None:  # None: the caller's connection is gone
                waiter.response = completion.response
                waiter.done.set()
        self._wake_timers.set()
        return failed

    async def _park(
        self, operation: Callable[[GroupCoordinator, int], Ticket]
    ) -> JoinGroupResponse | SyncGroupResponse:
        """Call the coordinator for a ticket and wait for its completion."""
        ticket = operation(self.coordinator, self.now_ms())
        waiter = self._waiters[ticket.id] = _Waiter()
        self._after_call()
        try:
            await waiter.done.wait()
        finally:
            self._waiters.pop(ticket.id, None)
        assert waiter.response is not None
        return waiter.response

    # -- timers ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Tick the coordinator at each deadline; expire offsets on their own period."""
        expiry_every_ms = self.config.int("offsets.retention.check.interval.ms")
        retention_ms = self.config.int("offsets.retention.minutes") * 60_000
        next_expiry = self.now_ms() + expiry_every_ms
        task_status.started()
        while True:
            deadline = min(self.coordinator.next_deadline() or math.inf, next_expiry)
            # Requests set this event, since each may move the next deadline earlier.
            self._wake_timers = trio.Event()
            with trio.move_on_after(max(0.0, (deadline - self.now_ms()) / 1000)):
                await self._wake_timers.wait()
            now = self.now_ms()
            expire = now >= next_expiry
            if expire:
                next_expiry = now + expiry_every_ms
            try:
                self.coordinator.tick(now)
                if expire:
                    self._expire_offsets(now, retention_ms)
                self._after_call()
            except Exception:
                # A bug in one group's timers must not stop the broker or the other groups.
                log.exception("group coordinator timers failed")

    def _expire_offsets(self, now_ms: int, retention_ms: int) -> None:
        expired = self.coordinator.expire_offsets(now_ms, retention_ms)
        count = sum(len(tps) for tps in expired.partitions.values())
        if count or expired.deleted_groups:
            log.info(
                "expired %d offset(s); removed %d empty group(s)",
                count,
                len(expired.deleted_groups),
            )


def log_batches(log_: UnifiedLog) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of the log (header and bytes), from its start to its end."""
    offset, end = log_.log_start_offset, log_.log_end_offset
    while offset < end:
        data = log_.read(offset, LOAD_CHUNK_BYTES, end)
        if not data:
            return
        for position, header in iter_batches(data):
            offset = header.next_offset
            yield header, memoryview(data)[position : position + header.size]


def log_records(log_: UnifiedLog) -> Iterator[Record]:
    """Every data record of the log, from its start to its end (control batches skipped)."""
    offset, end = log_.log_start_offset, log_.log_end_offset
    while offset < end:
        data = log_.read(offset, LOAD_CHUNK_BYTES, end)
        if not data:
            return
        for position, header in iter_batches(data):
            offset = header.next_offset
            if not header.is_control:
                yield from decode_records(memoryview(data)[position : position + header.size])


@dataclass(frozen=True)
class _TopicsView:
    """The broker's topics, as the consumer group coordinator looks them up."""

    replica_manager: ReplicaManager

    def by_name(self, name: str) -> TopicInfo | None:
        topic = self.replica_manager.topics.get(name)
        if topic is None:
            return None
        return TopicInfo(topic.topic_id, name, topic.metadata.num_partitions)

    def names(self) -> Iterable[str]:
        return self.replica_manager.topics.keys()


def _record(change: Change) -> tuple[bytes, bytes | None]:
    if isinstance(change, ConsumerGroupRecord):
        return change.key, change.value
    if isinstance(change, GroupChange):
        if change.value is None:
            return group_tombstone(change.group_id)
        return group_metadata_record(change.group_id, change.value)
    group_id, (topic, partition), value = change
    if value is None:
        return offset_tombstone(group_id, topic, partition)
    return offset_commit_record(group_id, topic, partition, value)
