"""The sans-IO group coordinator (classic and KIP-848 consumer groups): the one object the
I/O layer talks to.

How a trio layer drives it (nothing here blocks, sleeps or touches a socket):

* Every call takes `now_ms` (the broker's clock); nothing reads a clock itself.
* `join_group` / `sync_group` return a `Ticket`. The response for that ticket appears,
  possibly during that same call, in the completions drained by `take_completions()`.
  The I/O layer keeps `ticket -> waiting connection`, and after *every* call (requests
  and `tick`) drains completions and wakes the matching waiters. Completions for tickets
  whose connection is gone are simply dropped, as Kafka drops responses to closed sockets.
* `heartbeat`, `leave_group`, `commit_offsets`, `fetch_offsets`, `describe_group`,
  `list_groups`, `delete_groups`, `consumer_group_heartbeat` (given a view of the topics),
  `consumer_group_describe` answer directly (they may still complete other tickets,
  e.g. a leave that ends a rebalance, so drain afterwards too).
* Offset commits and removals (commits, expiry, OffsetDelete, DeleteGroups) and group
  metadata snapshots queue up in `take_changes()`; the I/O layer persists them in
  `__consumer_offsets` before it answers, and replays that topic through `load_offset`,
  `load_group` and `load_consumer_group_record` at startup.
* `next_deadline()` says when `tick(now_ms)` must be called next (None: no timers);
  `timers()` lists the pending deadlines as data. A single timer task sleeps until the
  next deadline, or until a request reschedules things, then ticks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import (
    admin,
    consumer_group_admin,
    consumer_group_heartbeat,
    consumer_group_store,
    group_store,
    heartbeat,
    join,
    leave,
    offset_commit,
    sync,
    txn_offsets,
)
from kafkalite.coordinator.admin import DescribedGroup, ListedGroup
from kafkalite.coordinator.config import GroupConfig
from kafkalite.coordinator.consumer_group_admin import DescribedConsumerGroup
from kafkalite.coordinator.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicsView,
)
from kafkalite.coordinator.consumer_group_records import ConsumerGroupKey, ConsumerGroupRecord
from kafkalite.coordinator.context import Context, random_uuid
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.group_snapshot import GroupChange
from kafkalite.coordinator.messages import (
    Completion,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    Ticket,
)
from kafkalite.coordinator.offset_commit import (
    ExpiredOffsets,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
)
from kafkalite.coordinator.offsets import OffsetAndMetadata, OffsetChange, TopicPartition
from kafkalite.coordinator.rebalance import on_timer
from kafkalite.coordinator.records import GroupMetadataRecord
from kafkalite.coordinator.timers import CONSUMER_TIMERS, Timer


class GroupCoordinator:
    def __init__(
        self, config: GroupConfig | None = None, *, new_uuid: Callable[[], str] = random_uuid
    ) -> None:
        self._ctx = Context(config=config or GroupConfig(), new_uuid=new_uuid)
        self._pending_txn = txn_offsets.PendingTxnOffsets()

    @property
    def config(self) -> GroupConfig:
        return self._ctx.config

    # -- membership --

    def join_group(self, request: JoinGroupRequest, now_ms: int) -> Ticket:
        return join.join_group(self._ctx, request, now_ms)

    def sync_group(self, request: SyncGroupRequest, now_ms: int) -> Ticket:
        return sync.sync_group(self._ctx, request, now_ms)

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        return heartbeat.heartbeat(self._ctx, request, now_ms)

    def leave_group(self, request: LeaveGroupRequest, now_ms: int) -> LeaveGroupResponse:
        return leave.leave_group(self._ctx, request, now_ms)

    # -- KIP-848 consumer groups --

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, topics: TopicsView, now_ms: int
    ) -> ConsumerGroupHeartbeatResponse:
        return consumer_group_heartbeat.heartbeat(self._ctx, request, topics, now_ms)

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        return consumer_group_admin.describe(self._ctx, group_id)

    def load_consumer_group_record(
        self, key: ConsumerGroupKey, value: bytes | None, now_ms: int
    ) -> None:
        """Replay a persisted consumer group record (None: its tombstone)."""
        consumer_group_store.load_record(self._ctx, key, value, now_ms)

    # -- offsets --

    def commit_offsets(self, request: OffsetCommitRequest, now_ms: int) -> OffsetCommitResponse:
        return offset_commit.commit_offsets(self._ctx, request, now_ms)

    def txn_commit_offsets(
        self, request: OffsetCommitRequest, producer_id: int
    ) -> OffsetCommitResponse:
        """TxnOffsetCommit: checked now, held until the transaction's marker."""
        return txn_offsets.txn_commit_offsets(self._ctx, self._pending_txn, request, producer_id)

    def complete_txn(self, group_id: str, producer_id: int, commit: bool, now_ms: int) -> None:
        """The transaction's marker reached the group's partition: apply or drop."""
        txn_offsets.complete_txn(
            self._ctx, self._pending_txn, group_id, producer_id, commit, now_ms
        )

    def load_pending_txn_offset(
        self, group_id: str, producer_id: int, tp: TopicPartition, value: OffsetAndMetadata
    ) -> None:
        """Replay of `__consumer_offsets`: an offset of a transaction still open there."""
        commit = offset_commit.PartitionCommit(
            tp.topic, tp.partition, value.offset, value.leader_epoch, value.metadata
        )
        txn_offsets.load_pending(self._pending_txn, group_id, producer_id, commit)

    def has_pending_txn_offset(self, group_id: str, tp: TopicPartition) -> bool:
        """An open transaction holds an offset for `tp` (OffsetFetch require_stable)."""
        return txn_offsets.has_pending(self._pending_txn, group_id, tp.topic, tp.partition)

    def pending_txn_groups(self, producer_id: int) -> list[str]:
        return txn_offsets.pending_groups(self._pending_txn, producer_id)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> OffsetFetchResponse:
        return offset_commit.fetch_offsets(self._ctx, group_id, partitions)

    def expire_offsets(self, now_ms: int, retention_ms: int) -> ExpiredOffsets:
        return offset_commit.expire_offsets(self._ctx, now_ms, retention_ms)

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> OffsetDeleteResponse:
        return offset_commit.delete_offsets(self._ctx, group_id, partitions)

    def committed(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._ctx.offsets.get(group_id, tp)

    def committed_offsets(self, group_id: str) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Every committed offset of the group (read-only), for lag reporting."""
        return self._ctx.offsets.of_group(group_id)

    def load_offset(
        self, group_id: str, tp: TopicPartition, value: OffsetAndMetadata | None, now_ms: int
    ) -> None:
        """Replay a persisted commit (None: its tombstone) without queueing it again."""
        offset_commit.load_offset(self._ctx, group_id, tp, value, now_ms)

    def load_group(self, group_id: str, record: GroupMetadataRecord | None, now_ms: int) -> None:
        """Replay persisted group metadata (None: its tombstone) without queueing it again."""
        group_store.load_group(self._ctx, group_id, record, now_ms)

    def unload_groups(self, unloaded: Callable[[str], bool]) -> list[str]:
        """Forget every group `unloaded` selects, with its offsets, timers and pending
        transactional offsets, queueing no change: its `__consumer_offsets` partition now has
        another coordinator (Kafka's onResignation). Returns the group ids dropped."""
        ctx, pending = self._ctx, self._pending_txn.by_producer
        known = {*ctx.groups, *ctx.consumer_groups, *ctx.offsets.group_ids()}
        known.update(group_id for group_id, _ in pending)
        dropped = sorted(group_id for group_id in known if unloaded(group_id))
        gone = set(dropped)
        for group_id in dropped:
            ctx.groups.pop(group_id, None)
            ctx.consumer_groups.pop(group_id, None)
            ctx.timers.cancel_group(group_id)
            ctx.offsets.unload_group(group_id)
        for key in [key for key in pending if key[0] in gone]:
            del pending[key]
        return dropped

    def take_changes(self) -> list[OffsetChange | GroupChange | ConsumerGroupRecord]:
        """Offset and group changes since the last call, in order, for `__consumer_offsets`."""
        changes, self._ctx.journal[:] = list(self._ctx.journal), []
        return changes

    # -- admin --

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        return admin.describe_group(self._ctx, group_id, api_version)

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        return admin.list_groups(self._ctx, states, types)

    def delete_groups(self, group_ids: Iterable[str], now_ms: int) -> dict[str, ErrorCode]:
        return admin.delete_groups(self._ctx, group_ids, now_ms)

    def has_group(self, group_id: str) -> bool:
        """A classic or consumer group of that id exists (a share group may not take it)."""
        return group_id in self._ctx.groups or group_id in self._ctx.consumer_groups

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group record, for inspection (treat it as read-only)."""
        return self._ctx.groups.get(group_id)

    # -- time and output --

    def next_deadline(self) -> int | None:
        return self._ctx.timers.next_deadline()

    def timers(self) -> list[Timer]:
        return self._ctx.timers.all()

    def tick(self, now_ms: int) -> None:
        """Apply every timer due at `now_ms`, earliest first (each may schedule others)."""
        while (timer := self._ctx.timers.pop_due(now_ms)) is not None:
            if timer.kind in CONSUMER_TIMERS:
                consumer_group_heartbeat.on_timer(self._ctx, timer, now_ms)
            else:
                on_timer(self._ctx, timer, now_ms)

    def take_completions(self) -> list[Completion]:
        completions, self._ctx.outbox[:] = list(self._ctx.outbox), []
        return completions
