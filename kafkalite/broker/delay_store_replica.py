"""A partition's delay store as its followers fetch it (issue 17: the store is replicated).

The store of partition P (broker/delayed_delivery_store.py) is served as a pseudo-partition
of P's topic: index `P | STORE_PARTITION_BIT`, under P's topic id, with P's leader, leader
epoch, replicas and ISR. P's replica fetchers can then copy the store as they copy P, with
no topic, assignment or controller work of its own. Only replicas are answered: a consumer
asking for such an index gets what it gets for any partition the topic does not have.

Leader side (StoreLeader, sans-IO): a follower's Fetch of the pseudo-partition reads
the store's log up to its end (or gets the diverging epoch of KIP-595 when its copy left
the leader's: every store batch carries P's leader epoch), its position is recorded once
per request, and the store's high watermark is the smallest store log end over P's ISR.
OffsetForLeaderEpoch and ListOffsets (earliest, latest) answer from the store's log.

Follower side (`open_store_copy`, `follow`): a follower of P keeps a copy of the store in the
same directory as a leader's store, as a follower-only Partition of the pseudo index over the
store's log; P's replica fetcher fetches it with P (same fetcher), appends the leader's
batches unchanged and truncates it by leader epoch, as for any partition. No DelayStore
(due-time index, releases) is open on a follower.

Retry topics with several replicas are refused still (their releases go to other
partitions, maybe led elsewhere).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed_delivery_store import store_config, store_dir
from kafkalite.broker.delayed_due_index import INDEX_DIR
from kafkalite.broker.partition import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    NOT_FOUND,
    UNDEFINED_EPOCH,
    UNKNOWN_OFFSET,
    LogReadResult,
    Partition,
    PartitionState,
    diverging_epoch,
)
from kafkalite.storage.errors import OffsetOutOfRangeError
from kafkalite.storage.log import UnifiedLog
from kafkalite.storage.offset_metadata import LogOffsetMetadata

STORE_PARTITION_BIT = 1 << 30  # above any partition count a topic can have


def store_partition(index: int) -> int:
    """The pseudo-partition index of partition `index`'s delay store."""
    return index | STORE_PARTITION_BIT


def store_source(index: int) -> int | None:
    """The partition whose delay store `index` names, None for an ordinary index."""
    if index < 0 or not index & STORE_PARTITION_BIT:
        return None
    return index & ~STORE_PARTITION_BIT


MAX_FENCES = 1024  # beyond, neighbours merge (conservative: a follower waits longer)


@dataclass(eq=False)
class StoreFollowers:
    """What the leader knows of its followers' copies of one store, in one leader epoch
    (a new leader knows nothing of them yet, as for the partition's own replicas).

    Fences order P's replication after the store's: (P offset T, store offset S) means a
    follower gets P's records from T on only once its copy of the store reaches S. A release
    writes its intent (store offset I) and appends R to P at T in one step, with the fence
    (T, I + 1): a replica that has R has the intent saying where R came from, so a new leader
    never releases R's records again. A new leader's first fence is (0, its store's end).

    Fences hold back the followers that copy the store (have a position in it this epoch)
    and those in P's ISR (electable). A follower that does neither (its copy of the topic's
    configs has not opted in yet) gets P unfenced, so it never stalls; it is not in sync
    either (StoreLeader.in_sync): it joins P's ISR only once its copy holds the store up to
    the store's high watermark and the intent of every release it got."""

    leader_epoch: int
    log_ends: dict[int, int] = field(default_factory=dict)  # broker id -> store log end
    high_watermark: int = 0
    fences: list[tuple[int, int]] = field(default_factory=list)

    def add_fence(self, partition_offset: int, store_offset: int, fenced: list[int]) -> None:
        self.fences.append((partition_offset, store_offset))
        self.prune(fenced)
        if len(self.fences) > MAX_FENCES:
            (first, _), (_, second) = self.fences[0], self.fences[1]
            self.fences[0:2] = [(first, second)]

    def prune(self, fenced: list[int]) -> None:
        """Forget the fences every fenced follower has passed (the store high watermark,
        over the ISR, is past them: a follower joining the ISR later must reach it)."""
        reached = min((self.log_ends.get(r, UNKNOWN_OFFSET) for r in fenced), default=None)
        while self.fences and (reached is None or self.fences[0][1] <= reached):
            del self.fences[0]

    def read_cap(self, replica_id: int) -> int | None:
        """The P offset a follower's read of P stops before (None: not fenced)."""
        reached = self.log_ends.get(replica_id, UNKNOWN_OFFSET)
        for partition_offset, store_offset in self.fences:
            if store_offset > reached:
                return partition_offset
        return None


@dataclass(eq=False)
class StoreLeader:
    """Partition P's store log, served by P's leader to P's followers."""

    partition: Partition
    log: UnifiedLog
    followers: StoreFollowers

    def begin_epoch(self) -> None:
        """Kafka's maybeAssignEpochStartOffset, as Partition.make_leader does for P: P's
        epoch starts at the store's log end, so a follower whose copy ends in an older epoch
        is told where that epoch ends here, before anything is written to the store in the
        new one."""
        cache = self.log.leader_epoch_cache
        if cache.latest_epoch < self.partition.leader_epoch:
            cache.assign(self.partition.leader_epoch, self.log.log_end_offset)
        self.add_fence(0, self.log.log_end_offset)

    def add_fence(self, partition_offset: int, store_offset: int) -> None:
        self.followers.add_fence(partition_offset, store_offset, self._fenced())

    def _fenced(self) -> list[int]:
        """The followers fences hold back: those copying the store, and P's ISR."""
        isr = self.partition.maximal_isr
        local = self.partition.local_broker_id
        return [
            r
            for r in self.partition.remote_replicas
            if r in self.followers.log_ends or (r in isr and r != local)
        ]

    def read_cap(self, replica_id: int) -> int | None:
        """The P offset a follower's read of P stops before (None: not held back)."""
        if replica_id not in self.followers.log_ends and replica_id not in (
            self.partition.maximal_isr
        ):
            return None  # it does not copy the store and cannot be elected
        return self.followers.read_cap(replica_id)

    def in_sync(self, replica_id: int, partition_offset: int) -> bool:
        """Whether a follower at `partition_offset` in P is in sync as far as the store goes
        (it may join P's ISR): its copy reaches the store high watermark (acknowledged held
        batches) and holds the intent of every release of P below its offset."""
        reached = self.followers.log_ends.get(replica_id)
        if reached is None or reached < self.followers.high_watermark:
            return False
        cap = self.followers.read_cap(replica_id)
        return cap is None or cap >= partition_offset

    def _error(self, current_leader_epoch: int, replica_id: int) -> ErrorCode:
        error = self.partition.check_leader(current_leader_epoch)
        if error is ErrorCode.none and replica_id not in self.partition.remote_replicas:
            return ErrorCode.not_leader_or_follower  # not a replica of P
        return error

    def _diverging_epoch(
        self, fetch_offset: int, last_fetched_epoch: int
    ) -> tuple[int, int] | None:
        """As Partition's, in this store's log."""
        return diverging_epoch(self.log, fetch_offset, last_fetched_epoch)

    def record_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        *,
        current_leader_epoch: int = -1,
        last_fetched_epoch: int = -1,
    ) -> bool:
        """A follower's store position, taken once per request before any read (not when
        the fetch is fenced or diverges). Returns whether the store's high watermark moved."""
        if self._error(current_leader_epoch, replica_id) is not ErrorCode.none:
            return False
        if self._diverging_epoch(fetch_offset, last_fetched_epoch) is not None:
            return False
        self.followers.log_ends[replica_id] = min(fetch_offset, self.log.log_end_offset)
        self.followers.prune(self._fenced())
        return self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """The smallest store log end over P's (maximal) ISR, never lowered."""
        local = self.partition.local_broker_id
        ends = [
            self.log.log_end_offset
            if broker_id == local
            else self.followers.log_ends.get(broker_id, UNKNOWN_OFFSET)
            for broker_id in self.partition.maximal_isr
        ]
        new_hw = min(ends, default=self.log.log_end_offset)
        if new_hw > self.followers.high_watermark:
            self.followers.high_watermark = new_hw
            return True
        return False

    def fetch_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int,
        current_leader_epoch: int = -1,
        min_one_batch: bool = True,
        last_fetched_epoch: int = -1,
    ) -> LogReadResult:
        """A follower's read of the store: to its log end, or the diverging epoch."""
        error = self._error(current_leader_epoch, replica_id)
        if error is not ErrorCode.none:
            return LogReadResult(error)
        diverging = self._diverging_epoch(fetch_offset, last_fetched_epoch)
        if diverging is not None:
            return self._result(b"", diverging)
        try:
            records = self.log.read(fetch_offset, max_bytes, self.log.log_end_offset, min_one_batch)
        except OffsetOutOfRangeError:
            return LogReadResult(ErrorCode.offset_out_of_range)
        return self._result(records)

    def fetch_upper_bound_metadata(
        self, current_leader_epoch: int, replica_id: int, isolation_level: int
    ) -> LogOffsetMetadata | ErrorCode:
        """Where a parked follower fetch may read the store to (its log end)."""
        error = self._error(current_leader_epoch, replica_id)
        if error is not ErrorCode.none:
            return error
        return self.log.offset_metadata(self.log.log_end_offset)

    def _result(self, records: bytes, diverging: tuple[int, int] | None = None) -> LogReadResult:
        hw = self.followers.high_watermark
        return LogReadResult(ErrorCode.none, records, hw, hw, self.log.log_start_offset, diverging)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch of the store: (error, epoch, end offset)."""
        error = self.partition.check_leader(current_leader_epoch)
        if error is not ErrorCode.none:
            return error, UNDEFINED_EPOCH, UNKNOWN_OFFSET
        epoch, end = self.log.leader_epoch_cache.end_offset_for(
            leader_epoch, self.log.log_end_offset
        )
        return ErrorCode.none, epoch, end

    def offset_for_timestamp(
        self, timestamp: int, current_leader_epoch: int = -1
    ) -> tuple[ErrorCode, tuple[int, int, int]]:
        """ListOffsets of the store, for a follower behind its log start: the earliest and
        the latest offset only (-1 as timestamp, the epoch at that offset)."""
        error = self.partition.check_leader(current_leader_epoch)
        if error is not ErrorCode.none:
            return error, NOT_FOUND
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = self.log.log_start_offset
        elif timestamp == LATEST:
            offset = self.log.log_end_offset
        else:
            return ErrorCode.unsupported_version, NOT_FOUND
        return ErrorCode.none, (offset, -1, self.log.epoch_for_offset(offset))


@dataclass(eq=False)
class FencedPartition:
    """P as a parked follower fetch sees it while the follower is fenced (StoreFollowers):
    readable up to the fence only, so appends beyond it do not answer the fetch empty."""

    partition: Partition
    cap: int

    @property
    def log(self) -> UnifiedLog:
        return self.partition.log

    def fetch_upper_bound_metadata(
        self, current_leader_epoch: int, replica_id: int, isolation_level: int
    ) -> LogOffsetMetadata | ErrorCode:
        bound = self.partition.fetch_upper_bound_metadata(
            current_leader_epoch, replica_id, isolation_level
        )
        if isinstance(bound, ErrorCode) or bound.message_offset <= self.cap:
            return bound
        return self.partition.log.offset_metadata(self.cap)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        return self.partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)


# -- follower side ----------------------------------------------------------------------------


def open_store_copy(partition: Partition, now_ms: int) -> Partition:
    """A follower's copy of P's store: the store's log (created empty if there is none),
    as a replica of P's pseudo-partition; `follow` gives it P's state. A due-time index
    left by a store led here before goes: the copy may be truncated and written again, so
    its checkpoint could describe another history (a leader opening the copy rebuilds it)."""
    directory = store_dir(partition.log.dir)
    shutil.rmtree(directory / INDEX_DIR, ignore_errors=True)
    log = UnifiedLog.open(directory, store_config(partition.log.config), now_ms=now_ms)
    copy = Partition(
        partition.topic,
        partition.topic_id,
        store_partition(partition.index),
        log,
        partition.local_broker_id,
    )
    follow(copy, partition)
    return copy


def follow(copy: Partition, partition: Partition) -> None:
    """The copy takes P's leader, epochs, replicas and ISR (P is a follower here)."""
    state = PartitionState(
        partition.topic,
        copy.index,
        tuple(partition.replicas),
        partition.leader_id,
        partition.leader_epoch,
        tuple(partition.isr),
        partition.partition_epoch,
        partition.controller_epoch,
    )
    copy.make_follower(state)
