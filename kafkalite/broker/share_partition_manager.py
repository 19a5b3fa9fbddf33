"""The partition leader's side of share groups (Kafka's SharePartitionManager and
DelayedShareFetch): share sessions, the share-partitions of this broker's partitions, reads
of their logs, acknowledgements, lock expiry, and their state persisted through the share
coordinator.

* A share-partition is initialized on first use: from its persisted state, else where its
  group's `share.auto.offset.reset` says (the end of the log, its start, or the first
  record at most so old), that start written at once so a restart does not move it.
* Fetches read from the share-partition's next fetch offset and acquire whole batches for
  the member; control records are never delivered, nor, under the group's
  `share.isolation.level=read_committed`, records of aborted transactions (archived).
  A fetch that acquires nothing waits in the fetch purgatory up to its max wait, woken by
  appends and by records released. The group's configs (broker/group_configs.py) apply
  from its next request.
* Acknowledgements (and releases: a closed session, a member gone, a lock expired) are
  answered once the share-partition's new state is committed in `__share_group_state`:
  nothing acknowledged is delivered again after a restart.
* Under share.version 2, a group with a dead-letter topic (KIP-1191) has the records it
  archives for a REJECT or at the delivery count limit persisted as ARCHIVING (as Kafka
  4.4; the acknowledgement is answered then), then written to the dead-letter topic in the
  background (broker/share_dead_letters.py), then persisted as ARCHIVED. Loaded in
  ARCHIVING, they are written again, less those the dead-letter topic already has.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed import DelayedOperation, TopicPartition
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.features import finalized_level
from kafkalite.broker.group_configs import (
    READ_COMMITTED,
    GroupConfigManager,
    ShareGroupSettings,
)
from kafkalite.broker.replica_fetcher_manager import inter_broker_endpoint
from kafkalite.broker.share_coordinator_service import SHARE_STATE_TOPIC, ShareCoordinatorService
from kafkalite.broker.share_dead_letters import DeadLetterWriter
from kafkalite.broker.share_persister import SharePersister
from kafkalite.security.inter_broker import inter_broker_security
from kafkalite.share.auto_offset_reset import BY_DURATION, EARLIEST
from kafkalite.share.dead_letter_records import DeadLetterSource
from kafkalite.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from kafkalite.share.share_records import SharePartitionKey
from kafkalite.share.share_session import ShareSessionCache, TopicIdPartition
from kafkalite.storage.batch import BatchHeader, iter_batches
from kafkalite.storage.records import decode_records
from kafkalite.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.broker.views import View
    from kafkalite.config import BrokerConfig

log = logging.getLogger("kafkalite.share")

# A share fetch acquires max_records (500 by default) at most: reading a client's whole
# max_bytes (50 MiB by default) of backlog for them would be mostly thrown away. A larger
# first batch is still read whole.
READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ShareFetchResult:
    """One partition's answer: records (whole batches) and what of them was acquired."""

    error: ErrorCode = ErrorCode.none
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()


@dataclass(eq=False)
class _Held:
    """A share-partition with what the manager knows about it."""

    key: SharePartitionKey
    topic: str
    state: SharePartition
    leader_epoch: int
    persisted_version: int = 0
    state_epoch: int = 0  # of the persisted state read: a reset since fences its writes
    isolation_level: int = READ_COMMITTED  # its group's share.isolation.level
    # Loaded with ARCHIVING records from state last written then: their dead letters may
    # have been written since (a crash before ARCHIVED); None once looked for.
    recovered_from_ms: int | None = None
    # Offsets found in the dead-letter topic since then: not written again.
    dead_lettered_before: set[int] = field(default_factory=set)


def share_partition_config(settings: ShareGroupSettings) -> SharePartitionConfig:
    return SharePartitionConfig(
        lock_duration_ms=settings.record_lock_duration_ms,
        delivery_count_limit=settings.delivery_count_limit,
        max_in_flight_records=settings.partition_max_record_locks,
        # KIP-1191: dead-letter topics come with share.version 2.
        dead_letter=bool(settings.dlq_topic) and finalized_level("share.version") >= 2,
    )


class DelayedShareFetch(DelayedOperation):
    """A share fetch that acquired nothing, until one of its partitions has records to
    acquire (new records up to the last stable offset, or released ones)."""

    def __init__(self, keys: Iterable[TopicPartition], ready: Callable[[], bool]) -> None:
        super().__init__(keys)
        self._ready = ready

    def try_complete(self) -> bool:
        return self.force_complete() if self._ready() else False


@dataclass(eq=False)
class SharePartitionManager:
    config: BrokerConfig
    replica_manager: ReplicaManager
    coordinator: ShareCoordinatorService
    group_configs: GroupConfigManager
    sessions: ShareSessionCache = field(init=False)
    dead_letters: DeadLetterWriter = field(init=False)
    persister: SharePersister = field(init=False)
    held: dict[SharePartitionKey, _Held] = field(default_factory=dict)
    # Share-partitions changed outside a request (a connection closed): the timer persists them.
    _dirty: dict[SharePartitionKey, _Held] = field(default_factory=dict)
    _wake_timer: trio.Event = field(default_factory=trio.Event)
    # When the timer task wakes next (inf: no lock to expire). A new lock expires after
    # every lock already held, so only the first needs to wake it.
    _timer_deadline: float = math.inf
    # Where the dead-letter writes run (`run`'s).
    _nursery: trio.Nursery | None = None

    def __post_init__(self) -> None:
        self.sessions = ShareSessionCache(self.config.int("group.share.max.share.sessions"))
        self.dead_letters = DeadLetterWriter(self.replica_manager)
        self.persister = SharePersister(
            self.coordinator,
            self.config.broker_id,
            self._state_partition_leader,
            lambda broker_id: inter_broker_endpoint(
                self.config, self.replica_manager.metadata, broker_id
            ),
            self.config.int("request.timeout.ms"),
            inter_broker_security(self.config),
        )

    def _state_partition_leader(self, index: int) -> int:
        state = self.replica_manager.metadata.partition_state(SHARE_STATE_TOPIC, index)
        return state.leader if state is not None else -1

    def now_ms(self) -> int:
        return self.replica_manager.clock_ms()

    # -- share-partitions ------------------------------------------------------------------

    def _partition(self, topic_id: uuid.UUID, index: int) -> tuple[ErrorCode, Partition | None]:
        topic = self.replica_manager.metadata.topic_by_id(topic_id)
        if topic is None:
            return ErrorCode.unknown_topic_id, None
        view = self.replica_manager.view(topic.name)
        # A view's share-partitions hold their own state over its source's partitions.
        partition = self.replica_manager.partition(view.source if view else topic.name, index)
        if partition is None or not partition.is_leader:
            return ErrorCode.not_leader_or_follower, None
        return ErrorCode.none, partition

    async def share_partition(
        self, group_id: str, tp: TopicIdPartition
    ) -> tuple[ErrorCode, _Held | None]:
        """The share-partition, initialized (and its start persisted) on first use; with its
        group's configs as they are now."""
        error, partition = self._partition(*tp)
        if partition is None:
            return error, None
        key = SharePartitionKey(group_id, *tp)
        settings = self.group_configs.settings(group_id)
        held = self.held.get(key)
        if held is None or held.leader_epoch != partition.leader_epoch:
            error, held = await self._load(key, partition, settings)
        if held is not None:
            held.state.config = share_partition_config(settings)
            held.isolation_level = settings.isolation_level
        return error, held

    async def _load(
        self, key: SharePartitionKey, partition: Partition, settings: ShareGroupSettings
    ) -> tuple[ErrorCode, _Held | None]:
        error, state = await self.persister.read_state(key, partition.leader_epoch)
        if error is not ErrorCode.none:
            return error, None
        config = share_partition_config(settings)
        if state is not None:
            share = SharePartition.from_state(config, state.start_offset, state.batches)
            share.move_start(partition.log.log_start_offset)
            held = _Held(key, partition.topic, share, partition.leader_epoch)
            held.persisted_version, held.state_epoch = share.version, state.state_epoch
            if share.dead_letters:  # ARCHIVING: their dead letters may be written already
                # (read from another broker: when is unknown, so the whole topic is looked at)
                held.recovered_from_ms = self.coordinator.written_at.get(key, 0)
            self.held[key] = held
            self._dead_letter_soon(held)  # those it stopped in ARCHIVING
            return ErrorCode.none, held
        share = SharePartition(config, self._initial_offset(partition, settings))
        held = self.held[key] = _Held(key, partition.topic, share, partition.leader_epoch, -1)
        error = await self.persist(held)
        if error is ErrorCode.none:
            return error, held
        if self.held.get(key) is held:  # not served before its start is durable (Kafka
            self._drop(key)  # removes a SharePartition whose initialization failed)
        return error, None

    def _initial_offset(self, partition: Partition, settings: ShareGroupSettings) -> int:
        """Where a share-partition without state starts: its group's
        share.auto.offset.reset (Kafka's SharePartition.initialize)."""
        reset = settings.auto_offset_reset
        if reset.kind == EARLIEST:
            return partition.log.log_start_offset
        latest = _readable_end(partition, settings.isolation_level)
        if reset.kind == BY_DURATION:
            since = self.now_ms() - reset.duration_ms
            error, (offset, _, _) = partition.fetch_offset_for_timestamp(since, from_client=False)
            if error is ErrorCode.none and offset >= 0:
                return min(offset, latest)
        return latest

    async def persist(self, held: _Held) -> ErrorCode:
        """Write the share-partition's state if it changed; NONE once it, and every write
        before it, is committed. Then records committed in ARCHIVING go to the dead-letter
        topic."""
        error = await self._write_state(held)
        if error is ErrorCode.none:
            self._dead_letter_soon(held)
        return error

    async def _write_state(self, held: _Held) -> ErrorCode:
        share = held.state
        if held.persisted_version == share.version:
            return await self.persister.committed(held.key)
        held.persisted_version = share.version
        changes = share.take_changes()
        error = await self.persister.write_state(
            held.key, held.state_epoch, held.leader_epoch, share.start_offset, changes
        )
        if error is ErrorCode.fenced_state_epoch:  # reset or deleted since (offsets admin)
            log.info("share-partition %s was reset: read again", held.key)
            if self.held.get(held.key) is held:  # as Kafka fences a SharePartition
                self._drop(held.key)
            return error
        if error is not ErrorCode.none:
            held.persisted_version = -1  # the next call writes it again
            share.changed.update(
                b for c in changes for b in range(c.first_offset, c.last_offset + 1)
            )
            log.warning("cannot persist share-partition %s: %s", held.key, error.name)
        else:
            share.archiving_persisted(changes)
        return error

    def _dead_letter_soon(self, held: _Held) -> None:
        if self._nursery is not None and held.state.pending_dead_letters():
            self._nursery.start_soon(self._dead_letter_then_archive, held)

    async def _dead_letter_then_archive(self, held: _Held) -> None:
        """Write the share-partition's ARCHIVING records to its group's dead-letter topic (not
        those a crash left written there), then persist them ARCHIVED."""
        dead_letters = held.state.take_dead_letters()
        if not dead_letters:
            return
        key = held.key
        source = DeadLetterSource(key.group_id, held.topic, key.partition)
        settings = self.group_configs.settings(key.group_id)
        try:
            if held.recovered_from_ms is not None:
                since, held.recovered_from_ms = held.recovered_from_ms, None
                held.dead_lettered_before = await self.dead_letters.written_since(
                    source, settings.dlq_topic, since
                )
            before = held.dead_lettered_before
            todo = [d for d in dead_letters if d.offset not in before]
            before.difference_update(d.offset for d in dead_letters)
            if todo:
                await self.dead_letters.write(source, settings, todo)
        except BaseException as exc:  # still ARCHIVING: the next persist, or load, retries
            for dead_letter in dead_letters:
                dead_letter.writing = False
            if not isinstance(exc, Exception):
                raise  # cancelled: the broker stops
            log.exception("cannot write the dead letters of %s", key)
            return
        # Written, or never will be (logged): archived either way, as Kafka does.
        held.state.dead_lettered(d.offset for d in dead_letters)
        self._released(held)  # the SPSO may have moved: the in-flight limit too
        if self.held.get(key) is held:
            await self.persist(held)

    # -- fetching --------------------------------------------------------------------------

    def _readable_end(self, held: _Held) -> int:
        partition = self.replica_manager.partition(held.topic, held.key.partition)
        return _readable_end(partition, held.isolation_level) if partition is not None else -1

    def acquirable(self, held: _Held) -> bool:
        return held.state.can_acquire(self._readable_end(held))

    def acquire(
        self,
        held: _Held,
        member_id: str,
        max_records: int,
        max_bytes: int,
        record_limit: bool = False,
    ) -> ShareFetchResult:
        """Read from the next fetch offset to the high watermark (read_committed: the last
        stable offset) and acquire."""
        partition = self.replica_manager.partition(held.topic, held.key.partition)
        if partition is None or not partition.is_leader:
            return ShareFetchResult(ErrorCode.not_leader_or_follower)
        share = held.state
        share.move_start(partition.log.log_start_offset)
        if not share.can_acquire(_readable_end(partition, held.isolation_level)):
            return ShareFetchResult()
        view = self._view_of(held)
        result = partition.fetch_records(
            share.next_fetch_offset(),
            min(max_bytes, READ_BYTES),
            isolation_level=held.isolation_level,
            read=self.replica_manager.view_read(view, partition) if view else None,
        )
        if result.error is not ErrorCode.none:
            return ShareFetchResult(result.error)
        aborted = result.aborted_transactions or ()
        batches = _fetched_batches(result.records, aborted, filtered=view is not None)
        acquired = share.acquire(
            member_id, [b for b, _ in batches], max_records, self.now_ms(), record_limit
        )
        if acquired and self._timer_deadline == math.inf:
            self._wake_timer.set()
        return ShareFetchResult(records=_covering(batches, acquired), acquired=tuple(acquired))

    def _view_of(self, held: _Held) -> View | None:
        """The view a share-partition reads (None when it reads a topic)."""
        topic = self.replica_manager.metadata.topic_by_id(held.key.topic_id)
        return self.replica_manager.view(topic.name) if topic is not None else None

    async def wait_for_records(self, helds: Sequence[_Held], max_wait_ms: int) -> None:
        """Park until one of the share-partitions has something to acquire."""
        if max_wait_ms <= 0 or not helds:
            return
        keys = [(h.topic, h.key.partition) for h in helds]
        delayed = DelayedShareFetch(keys, lambda: any(self.acquirable(h) for h in helds))
        await complete_or_expire(self.replica_manager.fetch_purgatory, delayed, max_wait_ms)

    # -- acknowledgements and releases -----------------------------------------------------

    def acknowledge(
        self, held: _Held, member_id: str, batches: Sequence[AcknowledgementBatch]
    ) -> ErrorCode:
        error = held.state.acknowledge(member_id, batches, self.now_ms())
        self._released(held)
        return error

    def release_member(
        self, group_id: str, member_id: str, tps: Iterable[TopicIdPartition] | None = None
    ) -> list[_Held]:
        """Make a member's records available again (its session closed, or it left the
        group); returns the share-partitions that changed, to persist."""
        changed = []
        for key, held in self.held.items():
            if key.group_id != group_id:
                continue
            if tps is not None and (key.topic_id, key.partition) not in tps:
                continue
            if held.state.release_member(member_id):
                self._released(held)
                changed.append(held)
        return changed

    async def member_left(self, group_id: str, member_id: str) -> None:
        """The group coordinator removed the member: its session goes, its records too."""
        self.sessions.close((group_id, member_id))
        for held in self.release_member(group_id, member_id):
            await self.persist(held)

    async def delete_group(self, group_id: str, keys: list[SharePartitionKey]) -> ErrorCode:
        """The (empty) share group was deleted: its sessions and share-partitions here go,
        and the persisted state of `keys` (every share-partition it has state for)."""
        for session_key in [k for k in self.sessions.sessions if k[0] == group_id]:
            self.sessions.close(session_key)
        for key in [k for k in self.held if k.group_id == group_id]:
            self._drop(key)
        return await self.persister.delete_state(keys)

    async def reset(self, key: SharePartitionKey, start_offset: int) -> ErrorCode:
        """AlterShareGroupOffsets: the share-partition starts afresh at `start_offset` (its
        group is empty); what was held of it here is dropped, to be read again (a leader
        on another broker reads it again at its next share session: forget_idle)."""
        self._drop(key)
        return await self.persister.initialize_state(key, start_offset)

    async def forget(self, keys: list[SharePartitionKey]) -> ErrorCode:
        """DeleteShareGroupOffsets: the share-partitions' state goes (their group is empty)."""
        for key in keys:
            self._drop(key)
        return await self.persister.delete_state(keys)

    def forget_idle(
        self, session_key: tuple[str, str], partitions: Iterable[TopicIdPartition]
    ) -> None:
        """A share session opens: the share-partitions of its group that no other session
        of the group reads here, with nothing acquired and everything persisted, are read
        again at their next use, so a start offset the group coordinator altered or deleted
        meanwhile (with the group empty, possibly on another broker) is the one used."""
        group_id = session_key[0]
        read = {
            tp
            for key, session in self.sessions.sessions.items()
            if key[0] == group_id and key != session_key
            for tp in session.partitions
        }
        for tp in partitions:
            key = SharePartitionKey(group_id, *tp)
            held = self.held.get(key)
            if held is None or tp in read or key in self._dirty or not held.state.idle():
                continue
            if held.persisted_version == held.state.version:
                self._drop(key)

    def _drop(self, key: SharePartitionKey) -> None:
        self.held.pop(key, None)
        self._dirty.pop(key, None)

    def connection_closed(self, connection_id: str) -> None:
        """A client's connection closed: its share sessions end and what the member held in
        them is released at once (persisted by the timer task)."""
        for session in self.sessions.close_connection(connection_id):
            group_id, member_id = session.key
            for held in self.release_member(group_id, member_id, session.partitions):
                self._dirty[held.key] = held
        if self._dirty:
            self._wake_timer.set()

    def _released(self, held: _Held) -> None:
        """Records may have become available: parked fetches retry."""
        self.replica_manager.fetch_purgatory.check_and_complete((held.topic, held.key.partition))

    # -- lock expiry -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Release records whose acquisition lock expired, at the earliest deadline; persist
        the releases of closed connections. Dead-letter writes run beside."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._expire_locks()
        finally:
            await self.persister.close()  # its connections to other share coordinators

    async def _expire_locks(self) -> None:
        while True:
            deadlines = [
                d for h in self.held.values() if (d := h.state.next_lock_deadline()) is not None
            ]
            self._timer_deadline = min(deadlines, default=math.inf)
            self._wake_timer = trio.Event()
            with trio.move_on_after(max(0.0, (self._timer_deadline - self.now_ms()) / 1000)):
                await self._wake_timer.wait()
            self._timer_deadline = math.inf
            now = self.now_ms()
            changed, self._dirty = self._dirty, {}
            for held in list(self.held.values()):
                if held.state.expire_locks(now):
                    self._released(held)
                    changed[held.key] = held
            for held in changed.values():
                try:
                    await self.persist(held)
                except Exception:
                    log.exception("cannot persist the releases of %s", held.key)


def _readable_end(partition: Partition, isolation_level: int) -> int:
    if isolation_level == READ_COMMITTED:
        return partition.last_stable_offset
    return partition.high_watermark


def _fetched_batches(
    records: bytes, aborted: Sequence[AbortedTxn], filtered: bool = False
) -> list[tuple[FetchedBatch, memoryview]]:
    """The batches read, each marked `skip` when never delivered: control batches, and
    data of aborted transactions (read_committed). `filtered` (a view's read): a batch
    keeps its offset range with only the matching records, so it is split into runs,
    the offsets without a record skipped (archived, never acquired)."""
    view = memoryview(records)
    batches: list[tuple[FetchedBatch, memoryview]] = []
    for position, header in iter_batches(records):
        skip = header.is_control or (
            header.is_transactional
            and any(
                t.producer_id == header.producer_id
                and t.first_offset <= header.base_offset <= t.last_offset
                for t in aborted
            )
        )
        data = view[position : position + header.size]
        if filtered and not skip:
            batches.extend((run, data) for run in _record_runs(header, data))
        else:
            batches.append((FetchedBatch(header.base_offset, header.last_offset, skip), data))
    return batches


def _record_runs(header: BatchHeader, data: memoryview) -> list[FetchedBatch]:
    """The batch's offset range as runs: those of its records, and the gaps between."""
    offsets = [record.offset for record in decode_records(data)] if header.records_count else []
    runs, start = [], header.base_offset
    for offset in offsets:
        if offset > start:
            runs.append(FetchedBatch(start, offset - 1, skip=True))
        if runs and not runs[-1].skip and runs[-1].last_offset == offset - 1:
            runs[-1] = FetchedBatch(runs[-1].base_offset, offset)
        else:
            runs.append(FetchedBatch(offset, offset))
        start = offset + 1
    if start <= header.last_offset:
        runs.append(FetchedBatch(start, header.last_offset, skip=True))
    return runs


def _covering(
    batches: list[tuple[FetchedBatch, memoryview]], acquired: Sequence[AcquiredRecords]
) -> bytes:
    """The batches holding acquired records (the client delivers only what was acquired)."""
    chosen: list[memoryview] = []
    for batch, data in batches:
        if chosen and chosen[-1] is data:  # a view's batch split into runs: sent once
            continue
        if any(
            a.first_offset <= batch.last_offset and batch.base_offset <= a.last_offset
            for a in acquired
        ):
            chosen.append(data)
    return b"".join(chosen)
