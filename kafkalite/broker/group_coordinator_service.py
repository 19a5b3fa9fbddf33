"""The trio side of the group coordinator: parked requests, timers and durable offsets.

The sans-IO `GroupCoordinator` decides everything. Handlers reach it only through `call`
(or `join_group` / `sync_group` / `commit_offsets`, built on the same path), so whatever a
call changes is persisted and announced without each handler remembering to. This layer
* parks JoinGroup/SyncGroup callers until their `Completion` arrives,
* runs one timer task that ticks the coordinator at its next deadline (and expires
  offsets every offsets.retention.check.interval.ms),
* persists every offset change in `__consumer_offsets` (compacted, partition = hash of the
  group id) with acks=all; OffsetCommit and TxnOffsetCommit are answered once the high
  watermark covers the write (Kafka's required acks -1),
* serves the groups of the `__consumer_offsets` partitions this broker leads (Kafka's
  onElection / onResignation, called by the ReplicaManager): a partition it becomes leader of
  is read to its log end (COORDINATOR_LOAD_IN_PROGRESS meanwhile; a load that a newer epoch
  or a lost leadership overtook installs nothing), one it stops leading is forgotten and its
  groups answered NOT_COORDINATOR.
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

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions
from kafkalite.broker.delayed import DelayedProduce
from kafkalite.broker.delayed import TopicPartition as PartitionKey
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.partition_loader import Batch, PartitionLoader, log_chunks
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    PartitionResult,
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
from kafkalite.storage.batch import TRANSACTIONAL_FLAG
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

# What a failed `__consumer_offsets` append means to a committer (Kafka's
# CoordinatorRuntime / GroupCoordinatorService error normalisation).
_APPEND_ERRORS = {
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
}


def coordinator_append_error(error: ErrorCode) -> ErrorCode:
    """The error a coordinator answers for a failed write of its internal topic."""
    return _APPEND_ERRORS.get(error, ErrorCode.unknown_server_error)


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
    ticket: Ticket
    done: trio.Event = field(default_factory=trio.Event)
    response: JoinGroupResponse | SyncGroupResponse | None = None


@dataclass(frozen=True)
class _PendingAppend:
    """An acks=all append of some groups' changes, until the high watermark covers it."""

    tp: PartitionKey
    delayed: DelayedProduce
    group_ids: frozenset[str]


@dataclass(eq=False)
class GroupCoordinatorService:
    config: BrokerConfig
    replica_manager: ReplicaManager
    coordinator: GroupCoordinator = field(init=False)
    _waiters: dict[int, _Waiter] = field(default_factory=dict)
    _wake_timers: trio.Event = field(default_factory=trio.Event)
    # The `__consumer_offsets` partitions this broker serves, and the loads to run.
    partitions: CoordinatorPartitions = field(default_factory=CoordinatorPartitions)
    loader: PartitionLoader = field(init=False)
    _num_partitions: int = 0  # of `__consumer_offsets`, as last known

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(group_config_from(self.config))
        self.loader = PartitionLoader(
            OFFSETS_TOPIC, self.partitions, self.replica_manager.partition, self._install
        )

    def now_ms(self) -> int:
        return self.replica_manager.clock_ms()

    # -- loading and unloading (Kafka's onElection / onResignation) -------------------------

    def load(self) -> None:
        """At startup: load the `__consumer_offsets` partitions this broker leads, then
        follow leadership changes."""
        topic = self.replica_manager.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            self._num_partitions = topic.metadata.num_partitions
            loaded = 0
            for partition in topic.partitions.values():
                if partition.is_leader and self.partitions.elect(
                    partition.index, partition.leader_epoch
                ):
                    batches = log_batches(partition.log)
                    loaded += self._install(partition.index, partition.leader_epoch, batches)
            log.info("loaded %d record(s) from %s", loaded, OFFSETS_TOPIC)
        self.replica_manager.coordinators.append(self)

    def on_election(self, topic: str, index: int, leader_epoch: int) -> None:
        if topic != OFFSETS_TOPIC or not self.partitions.elect(index, leader_epoch):
            return
        self._num_partitions = self._partition_count()
        self.loader.start(index, leader_epoch)

    def on_resignation(self, topic: str, index: int, leader_epoch: int | None) -> None:
        if topic != OFFSETS_TOPIC or not self.partitions.resign(index, leader_epoch):
            return
        count = self._num_partitions
        dropped = set(
            self.coordinator.unload_groups(
                lambda group_id: group_partition(group_id, count) == index
            )
        )
        for waiter in list(self._waiters.values()):
            if waiter.ticket.group_id in dropped:
                waiter.response = _not_coordinator(waiter.ticket)
                waiter.done.set()
        log.info("unloaded %d group(s) of %s-%d", len(dropped), topic, index)
        self._wake_timers.set()

    def check_group(self, group_id: str) -> ErrorCode:
        """NONE when this broker serves the group now; else NOT_COORDINATOR (it does not
        lead the group's partition) or COORDINATOR_LOAD_IN_PROGRESS."""
        if self.ensure_offsets_topic() is not ErrorCode.none:
            return ErrorCode.coordinator_not_available
        return self.partitions.error(group_partition(group_id, self._partition_count()))

    def _partition_count(self) -> int:
        topic = self.replica_manager.metadata.topics.get(OFFSETS_TOPIC)
        return topic.num_partitions if topic is not None else self._num_partitions

    def _install(
        self, index: int, epoch: int, batches: Iterable[Batch], announce: bool = False
    ) -> int:
        """Replay a loaded partition into the coordinator if its election still holds."""
        if not self.partitions.complete_load(index, epoch):
            return 0
        loaded = self._replay_batches(batches)
        if announce:  # not at startup or for an empty partition: one line for the topic
            log.info(
                "loaded %d record(s) of %s-%d in epoch %d", loaded, OFFSETS_TOPIC, index, epoch
            )
        self._wake_timers.set()
        return loaded

    def _replay_batches(self, batches: Iterable[Batch]) -> int:
        """Replay one partition. Transactional offset commits wait for their marker: a
        commit applies them, an abort drops them; those still open at the end stay pending
        in the coordinator (their transaction ends later)."""
        now, loaded = self.now_ms(), 0
        open_txns: dict[int, list[Record]] = defaultdict(list)
        for header, batch in batches:
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

    async def append_txn_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, commits: list[OffsetChange]
    ) -> ErrorCode:
        """TxnOffsetCommit: the offsets written to the group's partition as a transactional
        batch of the producer (Kafka's coordinator-origin append; no sequence numbers), so a
        restart holds them pending until the transaction's marker."""
        error = self.check_group(group_id)
        if error is not ErrorCode.none:
            return error
        topic = self.replica_manager.topics[OFFSETS_TOPIC]
        partition = topic.partitions[group_partition(group_id, topic.metadata.num_partitions)]
        batch = encode_batch(
            [_record(change) for change in commits],
            timestamp=self.now_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            attributes=TRANSACTIONAL_FLAG,
        )
        tp = (partition.topic, partition.index)
        results, delayed = self.replica_manager.append_records(
            {tp: batch}, -1, internal_topics_allowed=True, coordinator=True
        )
        if delayed is not None:
            await complete_or_expire(
                self.replica_manager.produce_purgatory, delayed, self._timeout()
            )
            results = delayed.results
        error = results[tp].error
        if error is ErrorCode.none:
            return error
        if error is ErrorCode.invalid_producer_epoch:
            return ErrorCode.producer_fenced
        return coordinator_append_error(error)

    def _timeout(self) -> int:
        return self.config.int("offsets.commit.timeout.ms")

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
        """Create `__consumer_offsets` on first use, as Kafka does (the cluster's topics: this
        broker need not hold a replica of it)."""
        if OFFSETS_TOPIC in self.replica_manager.metadata.topics:
            return ErrorCode.none
        outcome, _ = self.replica_manager.create_topic(
            OFFSETS_TOPIC,
            self.config.int("offsets.topic.num.partitions"),
            self.config.int("offsets.topic.replication.factor"),
            offsets_topic_configs(self.config),
        )
        if outcome.error is ErrorCode.topic_already_exists:
            # Another broker created it first (brokers race on first use in a cluster).
            log.info("%s was created by another broker", OFFSETS_TOPIC)
            return ErrorCode.none
        if not outcome.ok:
            log.error("cannot create %s: %s", OFFSETS_TOPIC, outcome.message)
            return ErrorCode.coordinator_not_available
        log.info("created %s", OFFSETS_TOPIC)
        return ErrorCode.none

    def _persist(self) -> tuple[dict[str, ErrorCode], list[_PendingAppend]]:
        """Append the queued offset changes with acks=all: returns the groups whose append
        failed at once, and the appends still waiting for the high watermark."""
        changes = self.coordinator.take_changes()
        if not changes:
            return {}, []
        if self.ensure_offsets_topic() is not ErrorCode.none:
            return {c.group_id: ErrorCode.coordinator_not_available for c in changes}, []
        topic = self.replica_manager.topics.get(OFFSETS_TOPIC)
        partitions = topic.partitions if topic is not None else {}
        by_partition: dict[int, list[Change]] = defaultdict(list)
        for change in changes:
            by_partition[group_partition(change.group_id, self._partition_count())].append(change)
        failed: dict[str, ErrorCode] = {}
        pending: list[_PendingAppend] = []
        for index, batch_changes in by_partition.items():
            partition = partitions.get(index)
            if partition is None or self.partitions.error(index) is not ErrorCode.none:
                failed.update((c.group_id, ErrorCode.not_coordinator) for c in batch_changes)
                continue
            error, delayed = self._append(partition, batch_changes)
            if error is not ErrorCode.none:
                failed.update((c.group_id, error) for c in batch_changes)
            elif delayed is not None:
                groups = frozenset(c.group_id for c in batch_changes)
                pending.append(_PendingAppend((OFFSETS_TOPIC, index), delayed, groups))
        return failed, pending

    def _append(
        self, partition: Partition, changes: list[Change]
    ) -> tuple[ErrorCode, DelayedProduce | None]:
        records = [_record(change) for change in changes]
        batch = encode_batch(records, timestamp=self.now_ms())
        tp = (partition.topic, partition.index)
        # acks=all, as Kafka writes group metadata and offsets (required acks -1).
        results, delayed = self.replica_manager.append_records(
            {tp: batch}, -1, internal_topics_allowed=True
        )
        result = results[tp]
        if result.error is not ErrorCode.none:
            log.warning("cannot persist %d offset change(s): %s", len(changes), result.error.name)
            return coordinator_append_error(result.error), None
        return ErrorCode.none, delayed

    async def _await_appends(self, pending: list[_PendingAppend]) -> dict[str, ErrorCode]:
        """Wait until the high watermark covers each append (or offsets.commit.timeout.ms
        passes); returns the groups whose append did not make it, with the error."""
        failed: dict[str, ErrorCode] = {}
        for append in pending:
            purgatory = self.replica_manager.produce_purgatory
            await complete_or_expire(purgatory, append.delayed, self._timeout())
            error = append.delayed.results[append.tp].error
            if error is not ErrorCode.none:
                failed.update(dict.fromkeys(append.group_ids, coordinator_append_error(error)))
        return failed

    # -- requests --------------------------------------------------------------------------

    def call(
        self, operation: Callable[[GroupCoordinator, int], T]
    ) -> tuple[T, dict[str, ErrorCode]]:
        """The one way into the coordinator: run `operation(coordinator, now_ms)`, then persist
        what it changed, answer parked callers and re-arm the timers. Returns its result and
        the groups whose changes could not be persisted (with the error to answer)."""
        result = operation(self.coordinator, self.now_ms())
        failed, _ = self._after_call()  # acks=all appends, answered without waiting
        return result, failed

    async def call_and_wait(
        self, operation: Callable[[GroupCoordinator, int], T]
    ) -> tuple[T, dict[str, ErrorCode]]:
        """`call`, answered once what it changed is replicated (Kafka waits so for
        OffsetCommit): the groups whose changes did not make it come with the error."""
        result = operation(self.coordinator, self.now_ms())
        failed, pending = self._after_call()
        failed.update(await self._await_appends(pending))
        return result, failed

    async def join_group(self, request: JoinGroupRequest) -> JoinGroupResponse:
        error = self.check_group(request.group_id)
        if error is not ErrorCode.none:
            return JoinGroupResponse(error, member_id=request.member_id)
        response = await self._park(lambda c, now: c.join_group(request, now))
        assert isinstance(response, JoinGroupResponse)
        return response

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        error = self.check_group(request.group_id)
        if error is not ErrorCode.none:
            return SyncGroupResponse(error)
        response = await self._park(lambda c, now: c.sync_group(request, now))
        assert isinstance(response, SyncGroupResponse)
        return response

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        """KIP-848: the one entry of ConsumerGroupHeartbeat into the coordinator."""
        error = self.check_group(request.group_id)
        if error is not ErrorCode.none:
            return ConsumerGroupHeartbeatResponse(error)
        topics = _TopicsView(self.replica_manager)
        response, not_persisted = self.call(
            lambda c, now: c.consumer_group_heartbeat(request, topics, now)
        )
        failed = not_persisted.get(request.group_id)
        if failed is None:
            return response
        return ConsumerGroupHeartbeatResponse(failed)

    async def commit_offsets(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """Answered once the commit is replicated (the high watermark covers it)."""
        error = self.check_group(request.group_id)
        if error is not ErrorCode.none:
            return OffsetCommitResponse(
                tuple(PartitionResult(p.topic, p.partition, error) for p in request.partitions)
            )
        operation = lambda c, now: c.commit_offsets(request, now)  # noqa: E731
        response, not_persisted = await self.call_and_wait(operation)
        failed = not_persisted.get(request.group_id)
        if failed is None:
            return response
        return OffsetCommitResponse(
            tuple(
                replace(p, error=failed) if p.error is ErrorCode.none else p
                for p in response.partitions
            )
        )

    def _after_call(self) -> tuple[dict[str, ErrorCode], list[_PendingAppend]]:
        """Persist, answer parked callers, re-arm timers (after every coordinator call)."""
        failed, pending = self._persist()
        for completion in self.coordinator.take_completions():
            waiter = self._waiters.pop(completion.ticket.id, None)
            if waiter is not None:  # None: the caller's connection is gone
                waiter.response = completion.response
                waiter.done.set()
        self._wake_timers.set()
        return failed, pending

    async def _park(
        self, operation: Callable[[GroupCoordinator, int], Ticket]
    ) -> JoinGroupResponse | SyncGroupResponse:
        """Call the coordinator for a ticket and wait for its completion."""
        ticket = operation(self.coordinator, self.now_ms())
        waiter = self._waiters[ticket.id] = _Waiter(ticket)
        self._after_call()
        try:
            await waiter.done.wait()
        finally:
            self._waiters.pop(ticket.id, None)
        assert waiter.response is not None
        return waiter.response

    # -- timers ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loads, and the timers."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.loader.run)
            await self._run_timers(task_status)

    async def _run_timers(self, task_status: trio.TaskStatus[None]) -> None:
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


def log_batches(log_: UnifiedLog) -> Iterator[Batch]:
    """Every batch of the log (header and bytes), from its start to its end."""
    for chunk in log_chunks(log_):
        yield from chunk


def _not_coordinator(ticket: Ticket) -> JoinGroupResponse | SyncGroupResponse:
    """The answer of a parked JoinGroup/SyncGroup whose group this broker no longer serves."""
    if ticket.kind == "join":
        return JoinGroupResponse(ErrorCode.not_coordinator, member_id="")
    return SyncGroupResponse(ErrorCode.not_coordinator)


def log_records(log_: UnifiedLog) -> Iterator[Record]:
    """Every data record of the log, from its start to its end (control batches skipped)."""
    for chunk in log_chunks(log_):
        for header, batch in chunk:
            if not header.is_control:
                yield from decode_records(batch)


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
