"""The group coordinator (classic and KIP-848) on the coordinator runtime: an adapter
between the sans-IO `GroupCoordinator` and broker/coordinator_runtime.py.

The state machine decides everything. Handlers reach it only through `call_and_wait` (or
`join_group` / `sync_group` / `commit_offsets` / `consumer_group_heartbeat`, built on the
same path), so whatever a call changes is written and announced without each handler
remembering to. This adapter
* turns the state machine's changes into `__consumer_offsets` records (Kafka's formats; the
  partition is the hash of the group id) and replays them when the runtime loads a partition;
* answers every request once its records, and every earlier record of its group's
  partition, are committed: JoinGroup/SyncGroup callers stay parked until their completion
  arrives and is committed, so a leader change cannot undo a generation or an assignment
  the members were told about; reads (OffsetFetch, DescribeGroups, ListGroups) wait on the
  writes before them the same way;
* runs one timer task that ticks the coordinator at its next deadline (and expires offsets
  every offsets.retention.check.interval.ms).
The runtime loads a `__consumer_offsets` partition this broker becomes leader of
(COORDINATOR_LOAD_IN_PROGRESS meanwhile) and unloads one it stops leading (`unload`: its
groups are forgotten, their parked callers answered NOT_COORDINATOR).
"""

from __future__ import annotations

import functools
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions
from kafkalite.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from kafkalite.broker.partition_loader import Batch, log_chunks
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.broker.views import is_view
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
from kafkalite.storage.control_batch import decode_marker
from kafkalite.storage.log import UnifiedLog
from kafkalite.storage.records import Record, decode_records

if TYPE_CHECKING:
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
    ErrorCode.not_coordinator: ErrorCode.not_coordinator,  # the partition was lost meanwhile
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

    def finish(self, response: JoinGroupResponse | SyncGroupResponse) -> None:
        if not self.done.is_set():
            self.response = response
            self.done.set()

    def finish_when_committed(
        self, response: JoinGroupResponse | SyncGroupResponse, error: ErrorCode
    ) -> None:
        """The runtime's callback: the answer, or the error of its uncommitted records."""
        self.finish(response if error is ErrorCode.none else _error_response(self.ticket, error))


@dataclass(eq=False)
class GroupCoordinatorService:
    """The group coordinator (classic and KIP-848) as an adapter onto the coordinator
    runtime: it turns the state machine's changes into `__consumer_offsets` records and
    replays them; the runtime loads, writes and answers once committed."""

    config: BrokerConfig
    replica_manager: ReplicaManager
    coordinator: GroupCoordinator = field(init=False)
    runtime: CoordinatorRuntime = field(init=False)
    _waiters: dict[int, _Waiter] = field(default_factory=dict)
    _wake_timers: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(group_config_from(self.config))
        self.runtime = CoordinatorRuntime(self._topic_spec, self.replica_manager, self)

    def _topic_spec(self) -> InternalTopic:
        return InternalTopic(
            OFFSETS_TOPIC,
            self.config.int("offsets.topic.num.partitions"),
            self.config.int("offsets.topic.replication.factor"),
            offsets_topic_configs(self.config),
        )

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self.runtime.partitions

    def now_ms(self) -> int:
        return self.replica_manager.clock_ms()

    # -- the runtime's shard: loading and unloading ---------------------------------------

    def load(self) -> None:
        """At startup: load the `__consumer_offsets` partitions this broker leads, then
        follow leadership changes."""
        loaded = self.runtime.start()
        if loaded is not None:
            log.info("loaded %d record(s) from %s", loaded, OFFSETS_TOPIC)

    def unload(self, index: int) -> None:
        count = self.runtime.partition_count()
        dropped = set(
            self.coordinator.unload_groups(
                lambda group_id: group_partition(group_id, count) == index
            )
        )
        for waiter in list(self._waiters.values()):
            if waiter.ticket.group_id in dropped:
                waiter.finish(_error_response(waiter.ticket, ErrorCode.not_coordinator))
        log.info("unloaded %d group(s) of %s-%d", len(dropped), OFFSETS_TOPIC, index)
        self._wake_timers.set()

    def replay(self, index: int, batches: list[Batch]) -> int:
        loaded = self._replay_batches(batches)
        self._wake_timers.set()
        return loaded

    def check_group(self, group_id: str) -> ErrorCode:
        """NONE when this broker serves the group now; else NOT_COORDINATOR (it does not
        lead the group's partition) or COORDINATOR_LOAD_IN_PROGRESS."""
        return self.runtime.check(group_id)

    def ensure_offsets_topic(self) -> ErrorCode:
        return self.runtime.ensure_topic()

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

    # -- writes ----------------------------------------------------------------------------

    def _timeout(self) -> int:
        return self.config.int("offsets.commit.timeout.ms")

    def _partition_of(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    async def append_txn_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, commits: list[OffsetChange]
    ) -> ErrorCode:
        """TxnOffsetCommit: the offsets written to the group's partition as a transactional
        batch of the producer (Kafka's coordinator-origin append; no sequence numbers), so a
        restart holds them pending until the transaction's marker."""
        error = self.check_group(group_id)
        if error is not ErrorCode.none:
            return error
        index = self._partition_of(group_id)
        error = self.runtime.append(
            index,
            [_record(change) for change in commits],
            timestamp_ms=self.now_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        if error is ErrorCode.none:
            error = (await self.runtime.committed([index], self._timeout())).get(
                index, ErrorCode.none
            )
        if error is ErrorCode.none:
            return error
        if error is ErrorCode.invalid_producer_epoch:
            return ErrorCode.producer_fenced
        return coordinator_append_error(error)

    def _persist(self) -> dict[str, ErrorCode]:
        """Append the queued changes, a batch per partition: the groups whose append failed
        (their partition was reverted to its log)."""
        changes = self.coordinator.take_changes()
        if not changes:
            return {}
        if self.ensure_offsets_topic() is not ErrorCode.none:
            return {c.group_id: ErrorCode.coordinator_not_available for c in changes}
        by_partition: dict[int, list[Change]] = defaultdict(list)
        for change in changes:
            by_partition[self._partition_of(change.group_id)].append(change)
        failed: dict[str, ErrorCode] = {}
        for index, batch_changes in by_partition.items():
            records = [_record(change) for change in batch_changes]
            error = self.runtime.append(index, records, timestamp_ms=self.now_ms())
            if error is not ErrorCode.none:
                mapped = coordinator_append_error(error)
                failed.update((c.group_id, mapped) for c in batch_changes)
        return failed

    # -- requests --------------------------------------------------------------------------

    def call(
        self, operation: Callable[[GroupCoordinator, int], T]
    ) -> tuple[T, dict[str, ErrorCode]]:
        """Run `operation(coordinator, now_ms)`, then write what it changed, hand parked
        callers their answers once committed and re-arm the timers. Returns its result and
        the groups whose changes could not be written. For the broker's own work (timers,
        transaction completion); a request's answer waits: `call_and_wait`."""
        result = operation(self.coordinator, self.now_ms())
        return result, self._after_call()

    async def call_and_wait(
        self,
        operation: Callable[[GroupCoordinator, int], T],
        group_ids: Iterable[str] | None = None,
    ) -> tuple[T, dict[str, ErrorCode]]:
        """`call`, returned once what it wrote, and every earlier write to the partitions of
        `group_ids` (None: of every partition served here), is committed, so an answer never
        shows state a leader change could undo. The groups whose writes did not make it
        come with the error to answer (with None, under the key "")."""
        result = operation(self.coordinator, self.now_ms())
        failed = self._after_call()
        if group_ids is None:
            errors = await self.runtime.committed(self.runtime.served(), self._timeout())
            if errors:
                failed[""] = coordinator_append_error(next(iter(errors.values())))
            return result, failed
        groups = {group_id: self._partition_of(group_id) for group_id in group_ids}
        errors = await self.runtime.committed(groups.values(), self._timeout())
        for group_id, index in groups.items():
            if index in errors:
                failed.setdefault(group_id, coordinator_append_error(errors[index]))
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

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        """KIP-848: the one entry of ConsumerGroupHeartbeat into the coordinator."""
        error = self.check_group(request.group_id)
        if error is not ErrorCode.none:
            return ConsumerGroupHeartbeatResponse(error)
        topics = TopicsView(self.replica_manager)
        response, not_persisted = await self.call_and_wait(
            lambda c, now: c.consumer_group_heartbeat(request, topics, now), [request.group_id]
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
        response, not_persisted = await self.call_and_wait(operation, [request.group_id])
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
        """Write, hand parked callers their answers once committed, re-arm timers (after
        every coordinator call)."""
        failed = self._persist()
        for completion in self.coordinator.take_completions():
            waiter = self._waiters.pop(completion.ticket.id, None)
            if waiter is None:  # the caller's connection is gone
                continue
            group_id = completion.ticket.group_id
            if group_id in failed:
                waiter.finish(_error_response(completion.ticket, failed[group_id]))
                continue
            answer = functools.partial(waiter.finish_when_committed, completion.response)
            self.runtime.defer(self._partition_of(group_id), answer)
        self._wake_timers.set()
        return failed

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
            await nursery.start(self.runtime.run)
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


def _error_response(ticket: Ticket, error: ErrorCode) -> JoinGroupResponse | SyncGroupResponse:
    """The answer of a parked JoinGroup/SyncGroup whose group this broker no longer serves,
    or whose records were not committed (NOT_COORDINATOR when the partition was lost)."""
    if ticket.kind == "join":
        return JoinGroupResponse(error, member_id="")
    return SyncGroupResponse(error)


def log_records(log_: UnifiedLog) -> Iterator[Record]:
    """Every data record of the log, from its start to its end (control batches skipped)."""
    for chunk in log_chunks(log_):
        for header, batch in chunk:
            if not header.is_control:
                yield from decode_records(batch)


@dataclass(frozen=True)
class TopicsView:
    """The broker's topics, as the consumer group coordinator looks them up."""

    replica_manager: ReplicaManager

    def by_name(self, name: str) -> TopicInfo | None:
        topic = self.replica_manager.topics.get(name)
        if topic is not None:
            return TopicInfo(topic.topic_id, name, topic.metadata.num_partitions)
        view = self.replica_manager.metadata.topics.get(name)  # views have no replica here
        if is_view(view):
            assert view is not None
            return TopicInfo(view.topic_id, name, view.num_partitions)
        return None

    def names(self) -> Iterable[str]:
        views = (view.name for view in self.replica_manager.views.all())
        return [*self.replica_manager.topics.keys(), *views]


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
