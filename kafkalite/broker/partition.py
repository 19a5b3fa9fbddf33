"""One partition's replication state and its data path (Kafka's Partition.scala).

A `Partition` owns what a replica knows about its partition: leader id, leader epoch,
partition epoch, replicas, ISR and the high watermark, plus a `Replica` record per remote
replica (its fetch position and last caught-up time) that the leader keeps. The high
watermark is the smallest log end offset of the ISR: on a single node the ISR is this broker
alone, so it follows the log end offset, but it is computed the same way a leader with
followers computes it. Appends as leader check `min.insync.replicas` first; reads stop at the
high watermark for consumers (the log end for followers). `make_leader` / `make_follower`
apply the controller's decisions and reject stale ones (epoch fencing).

Sans-IO: plain synchronous state, driven by the ReplicaManager.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.errors import OffsetOutOfRangeError, StorageError
from kafkalite.storage.leader_epoch import EpochEntry, LeaderEpochCache
from kafkalite.storage.log import AppendResult, UnifiedLog
from kafkalite.storage.offset_metadata import LogOffsetMetadata
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkalite.storage.txn_index import AbortedTxn

NO_LEADER = -1
UNKNOWN_OFFSET = -1
UNDEFINED_EPOCH = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
# ListOffsets' special timestamps.
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
NOT_FOUND = (-1, -1, -1)  # (offset, timestamp, leader epoch)
_EARLIEST = (EARLIEST, EARLIEST_LOCAL)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The controller's decision for one partition (Kafka's LeaderAndIsrPartitionState /
    ZooKeeper's `/brokers/topics/<t>/partitions/<p>/state` plus the assignment)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0  # the state znode's version (KRaft: the partition epoch)
    controller_epoch: int = 0


@dataclass(slots=True)
class Replica:
    """What a leader knows of one follower (Kafka's Replica / ReplicaState)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, leader_end_offset: int, now_ms: int
    ) -> None:
        """Kafka's updateFetchStateOrThrow: a fetch at the leader's end means caught up."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_time_ms = now_ms

    def reset(self, now_ms: int, caught_up: bool) -> None:
        """A new leader knows nothing of its followers' positions yet."""
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if caught_up else 0


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """One partition's answer to a fetch (Kafka's LogReadResult)."""

    error: ErrorCode
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # (epoch, end offset) where the fetcher's log leaves this one: it must truncate first.
    diverging_epoch: tuple[int, int] | None = None
    # read_committed only: the aborted transactions overlapping the records returned.
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    # The offset is in remote storage: the fetch reads it from there (Kafka's
    # RemoteStorageFetchInfo), off the event loop, before it answers.
    remote_fetch: RemoteFetch | None = None


@dataclass(frozen=True, slots=True)
class RemoteFetch:
    """What a consumer's fetch below the local log start reads from remote storage."""

    fetch_offset: int
    max_bytes: int
    max_offset: int
    min_one_batch: bool
    isolation_level: int


@dataclass(eq=False)
class Partition:
    topic: str
    topic_id: uuid.UUID
    index: int
    log: UnifiedLog
    local_broker_id: int
    leader_id: int = NO_LEADER
    leader_epoch: int = UNDEFINED_EPOCH
    partition_epoch: int = -1
    controller_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    high_watermark: int = 0
    remote_replicas: dict[int, Replica] = field(default_factory=dict)
    # The ISR asked of the controller while that write is in flight (Kafka's
    # PendingExpandIsr / PendingShrinkIsr); cleared by the next state applied.
    pending_isr: list[int] | None = None

    # -- positions -------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def remote_log_start_offset(self) -> int | None:
        """Where the remote segments start (tiered storage), None without any."""
        remote = self.log.remote
        return remote.log_start_offset if remote is not None and self.log.tiered else None

    @property
    def earliest_offset(self) -> int:
        """The log start across tiers: the remote log start while there are remote segments
        below the local ones (the local log start is `log_start_offset`)."""
        remote_start = self.remote_log_start_offset
        local = self.log_start_offset
        return local if remote_start is None else min(remote_start, local)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def last_stable_offset(self) -> int:
        """No offset at or after the first open transaction is stable."""
        unstable = self.log.first_unstable_offset
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)

    def _replica_end_offset(self, broker_id: int) -> int:
        if broker_id == self.local_broker_id:
            return self.log_end_offset
        replica = self.remote_replicas.get(broker_id)
        return UNKNOWN_OFFSET if replica is None else replica.log_end_offset

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR plus any replica a pending change would add or still counts: while a change
        is in flight the high watermark and acks=all assume the larger set (Kafka's maximalIsr),
        so neither moves on a decision the controller has not confirmed."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def maybe_increment_high_watermark(self) -> bool:
        """Kafka's maybeIncrementLeaderHW: the smallest log end offset of the ISR, never
        lowered. Returns whether it moved (delayed operations may complete)."""
        if not self.is_leader:
            return False
        new_hw = min(self._replica_end_offset(broker_id) for broker_id in self.maximal_isr)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    # -- controller decisions --------------------------------------------------------------

    def _stale(self, state: PartitionState) -> bool:
        """Kafka's epoch fencing: an older leader epoch, or the same epoch with an older
        partition epoch, is a decision already superseded."""
        if state.leader_epoch != self.leader_epoch:
            return state.leader_epoch < self.leader_epoch
        return state.partition_epoch < self.partition_epoch

    def _apply(self, state: PartitionState) -> None:
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.pending_isr = None

    def make_leader(self, state: PartitionState, now_ms: int) -> ErrorCode:
        """Become (or stay) leader under `state`; FENCED_LEADER_EPOCH for a stale decision."""
        if self._stale(state):
            return ErrorCode.fenced_leader_epoch
        new_epoch = state.leader_epoch != self.leader_epoch or not self.is_leader
        self._apply(state)
        self.remote_replicas = {
            broker_id: self.remote_replicas.get(broker_id, Replica(broker_id))
            for broker_id in state.replicas
            if broker_id != self.local_broker_id
        }
        if new_epoch:
            # Kafka: followers in the ISR count as caught up from now, the others do not.
            for replica in self.remote_replicas.values():
                replica.reset(now_ms, caught_up=replica.broker_id in self.isr)
            # Kafka's maybeAssignEpochStartOffset: the new epoch starts at the log end, so
            # OffsetForLeaderEpoch and diverging-epoch checks know it before the first append.
            if self.log.leader_epoch_cache.latest_epoch < state.leader_epoch:
                self.log.leader_epoch_cache.assign(state.leader_epoch, self.log_end_offset)
        if self.high_watermark > self.log_end_offset:
            self.high_watermark = self.log_end_offset
        self.maybe_increment_high_watermark()
        return ErrorCode.none

    def make_follower(self, state: PartitionState) -> ErrorCode:
        """Follow `state.leader`; FENCED_LEADER_EPOCH for a stale decision. Truncation to the
        new leader's log is the fetcher's job (by leader epoch, never by HW alone)."""
        if self._stale(state):
            return ErrorCode.fenced_leader_epoch
        self._apply(state)
        self.remote_replicas = {}
        return ErrorCode.none

    def check_leader_epoch(self, requested: int) -> ErrorCode:
        """Kafka's check of a client's current_leader_epoch (-1: not checked)."""
        if requested == -1 or requested == self.leader_epoch:
            return ErrorCode.none
        if requested > self.leader_epoch:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.fenced_leader_epoch

    def check_leader(self, current_leader_epoch: int = -1) -> ErrorCode:
        """Errors a client addressing this replica as leader gets, or NONE."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.none:
            return error
        return ErrorCode.none if self.is_leader else ErrorCode.not_leader_or_follower

    # -- leader data path ------------------------------------------------------------------

    def append_records_to_leader(
        self,
        records: bytes,
        required_acks: int,
        min_isr: int,
        now_ms: int,
        *,
        coordinator: bool = False,
    ) -> AppendResult | StorageError | ErrorCode:
        """Kafka's appendRecordsToLeader: acks=all needs an ISR of at least min.insync.replicas
        before anything is written."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if required_acks == -1 and len(self.isr) < self.effective_min_isr(min_isr):
            return ErrorCode.not_enough_replicas
        try:
            result = self.log.append_as_leader(
                records, self.leader_epoch, now_ms, coordinator=coordinator
            )
        except StorageError as exc:
            return exc
        self.maybe_increment_high_watermark()
        return result

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, now_ms: int
    ) -> int | StorageError | ErrorCode:
        """WriteTxnMarkers: a commit/abort marker appended as leader (the coordinator's
        write, Kafka's AppendOrigin.COORDINATOR). Returns the marker's offset."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        try:
            offset = self.log.append_marker(
                producer_id, producer_epoch, marker, self.leader_epoch, now_ms
            )
        except StorageError as exc:
            return exc
        self.maybe_increment_high_watermark()
        return offset

    def check_enough_replicas_reach_offset(
        self, required_offset: int, min_isr: int
    ) -> tuple[bool, ErrorCode]:
        """Kafka's checkEnoughReplicasReachOffset: (done, error) for a parked acks=all."""
        if not self.is_leader:
            return False, ErrorCode.not_leader_or_follower
        if self.high_watermark < required_offset:
            return False, ErrorCode.none
        if len(self.maximal_isr) < self.effective_min_isr(min_isr):
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none

    def effective_min_isr(self, min_isr: int) -> int:
        """Kafka's effectiveMinIsr: min.insync.replicas capped at the replication factor, so
        a single-replica topic takes acks=all under a broker-wide min.insync.replicas=2."""
        return min(min_isr, max(len(self.replicas), 1))

    # -- ISR changes (the leader proposes, the controller decides) ---------------------------

    def _leader_epoch_start_offset(self) -> int:
        entry = self.log.leader_epoch_cache.latest_entry
        return entry.start_offset if entry is not None else 0

    def maybe_expand_isr(self, replica_id: int) -> list[int] | None:
        """Kafka's maybeExpandIsr: a follower outside the ISR that reached the high watermark
        (and the start of this leader's epoch, so it holds everything this leader wrote)
        joins. Returns the ISR to ask for (now pending), or None."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return None
        replica = self.remote_replicas.get(replica_id)
        if replica is None or replica_id not in self.replicas:
            return None
        caught_up = replica.log_end_offset >= max(
            self.high_watermark, self._leader_epoch_start_offset()
        )
        if not caught_up:
            return None
        self.pending_isr = [*self.isr, replica_id]
        return self.pending_isr

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """Kafka's getOutOfSyncReplicas: ISR followers neither at the log end nor caught up
        within `max_lag_ms`."""
        lagging = []
        for broker_id in self.isr:
            replica = self.remote_replicas.get(broker_id)
            if replica is None:
                continue
            at_end = replica.log_end_offset == self.log_end_offset
            if not at_end and now_ms - replica.last_caught_up_time_ms > max_lag_ms:
                lagging.append(broker_id)
        return lagging

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> list[int] | None:
        """Kafka's maybeShrinkIsr: the ISR without its lagging followers (now pending), or
        None when nothing changes or a change is already in flight."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not lagging:
            return None
        self.pending_isr = [r for r in self.isr if r not in lagging]
        return self.pending_isr

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """Record a follower's fetch (and its own log start, when it sent one); False when it
        is not a replica of this partition."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            return False
        if log_start_offset < 0:
            log_start_offset = replica.log_start_offset
        replica.update_fetch_state(fetch_offset, log_start_offset, self.log_end_offset, now_ms)
        self.maybe_increment_high_watermark()
        return True

    def record_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        *,
        current_leader_epoch: int = -1,
        last_fetched_epoch: int = -1,
        now_ms: int = 0,
        log_start_offset: int = -1,
    ) -> bool:
        """A follower's fetch, taken once per request before any read (Kafka's
        updateFollowerFetchState): its position is recorded unless the fetch is fenced or
        diverges. Returns whether the high watermark moved."""
        if self.check_leader(current_leader_epoch) is not ErrorCode.none:
            return False
        if self._diverging_epoch(fetch_offset, last_fetched_epoch) is not None:
            return False
        high_watermark = self.high_watermark
        self.update_follower_fetch_state(replica_id, fetch_offset, now_ms, log_start_offset)
        return self.high_watermark > high_watermark

    def fetch_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        current_leader_epoch: int = -1,
        replica_id: int = -1,
        isolation_level: int = READ_UNCOMMITTED,
        min_one_batch: bool = True,
        last_fetched_epoch: int = -1,
        read: Callable[[int, int, int, bool], bytes] | None = None,
    ) -> LogReadResult:
        """Kafka's fetchRecords: followers read to the log end, consumers to the high
        watermark (read_committed: the last stable offset). A follower whose last fetched
        epoch ends earlier here gets the diverging epoch instead of records (KIP-595's
        truncation detection). Only reads: a follower's position is recorded once per
        request, before (`record_follower_fetch`), not on a parked fetch's final read.
        `read` replaces the log's read (offset, max bytes, max offset, min one batch): a
        view's filtered read of this partition."""
        error = self.check_leader(current_leader_epoch)
        if error is not ErrorCode.none:
            return LogReadResult(error)
        if replica_id >= 0:
            if replica_id not in self.remote_replicas:
                return LogReadResult(ErrorCode.not_leader_or_follower)
            diverging = self._diverging_epoch(fetch_offset, last_fetched_epoch)
            if diverging is not None:
                return self._read_result(b"", diverging)
        max_offset = self._fetch_upper_bound(replica_id, isolation_level)
        try:
            records = (read or self.log.read)(fetch_offset, max_bytes, max_offset, min_one_batch)
        except OffsetOutOfRangeError:
            if replica_id >= 0 and self._in_remote_tier(fetch_offset):
                # Kafka's follower fetch below the local log start of a tiered log: the
                # follower rebuilds from the remote tier, it does not copy it.
                return LogReadResult(ErrorCode.offset_moved_to_tiered_storage)
            if replica_id < 0 and read is None and self._in_remote_tier(fetch_offset):
                remote = RemoteFetch(
                    fetch_offset, max_bytes, max_offset, min_one_batch, isolation_level
                )
                return replace(self._read_result(b"", for_consumer=True), remote_fetch=remote)
            return LogReadResult(ErrorCode.offset_out_of_range)
        result = self._read_result(records, for_consumer=replica_id < 0)
        if replica_id < 0 and isolation_level == READ_COMMITTED:
            aborted = self.log.collect_aborted(fetch_offset, max_offset) if records else []
            result = replace(result, aborted_transactions=tuple(aborted))
        return result

    def remote_segments_for_timestamp(self, timestamp: int) -> list[RemoteLogSegmentMetadata]:
        """The remote segments below the local log start that hold a record at or after
        `timestamp` (their max timestamp says), oldest first: where a ListOffsets for it
        looks before the local segments."""
        remote = self.log.remote
        if timestamp < 0 or remote is None or self.remote_log_start_offset is None:
            return []
        return [
            metadata
            for metadata in remote.copied
            if metadata.start_offset < self.log_start_offset
            and metadata.max_timestamp_ms >= timestamp
        ]

    def _in_remote_tier(self, offset: int) -> bool:
        remote_start = self.remote_log_start_offset
        return remote_start is not None and remote_start <= offset < self.log_start_offset

    def _fetch_upper_bound(self, replica_id: int, isolation_level: int) -> int:
        """Kafka's FetchIsolation: LOG_END, TXN_COMMITTED or HIGH_WATERMARK."""
        if replica_id >= 0:
            return self.log_end_offset
        if isolation_level == READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def fetch_upper_bound_metadata(
        self, current_leader_epoch: int, replica_id: int, isolation_level: int
    ) -> LogOffsetMetadata | ErrorCode:
        """Kafka's fetchOffsetSnapshot for a parked fetch: where the offset it may read up
        to sits in the log (no records read), or why it cannot fetch here any more."""
        error = self.check_leader(current_leader_epoch)
        if error is not ErrorCode.none:
            return error
        return self.log.offset_metadata(self._fetch_upper_bound(replica_id, isolation_level))

    def _read_result(
        self,
        records: bytes,
        diverging_epoch: tuple[int, int] | None = None,
        for_consumer: bool = False,
    ) -> LogReadResult:
        """Consumers are told the log start across tiers; followers the local one, which is
        where they can fetch from."""
        return LogReadResult(
            ErrorCode.none,
            records,
            self.high_watermark,
            self.last_stable_offset,
            self.earliest_offset if for_consumer else self.log_start_offset,
            diverging_epoch,
        )

    def _diverging_epoch(
        self, fetch_offset: int, last_fetched_epoch: int
    ) -> tuple[int, int] | None:
        return diverging_epoch(self.log, fetch_offset, last_fetched_epoch)

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        current_leader_epoch: int = -1,
        isolation_level: int = READ_UNCOMMITTED,
        from_client: bool = True,
    ) -> tuple[ErrorCode, tuple[int, int, int]]:
        """ListOffsets: (offset, timestamp, leader epoch) with Kafka's special timestamps;
        latest is the high watermark (read_committed: the last stable offset)."""
        error = self.check_leader(current_leader_epoch)
        if error is not ErrorCode.none:
            return error, NOT_FOUND
        found = self._offset_for_timestamp(timestamp, isolation_level)
        if from_client and self._high_watermark_lags_epoch_start():
            # Kafka's fetchOffsetForTimestamp: a new leader whose high watermark has not yet
            # reached the start of its epoch does not know the latest offset (the old leader
            # may have exposed more); the client retries.
            looked_up = timestamp >= 0 or timestamp == MAX_TIMESTAMP
            if timestamp == LATEST or (looked_up and found == NOT_FOUND):
                return ErrorCode.offset_not_available, NOT_FOUND
        return ErrorCode.none, found

    def _high_watermark_lags_epoch_start(self) -> bool:
        latest = self.log.leader_epoch_cache.latest_entry
        return (
            latest is not None
            and latest.epoch == self.leader_epoch
            and latest.start_offset > self.high_watermark
        )

    def _offset_for_timestamp(self, timestamp: int, isolation_level: int) -> tuple[int, int, int]:
        log = self.log
        if timestamp == EARLIEST and self.remote_log_start_offset is not None:
            return self._earliest_remote()
        if timestamp in _EARLIEST:
            start = self.log_start_offset
            return start, -1, log.epoch_for_offset(start)
        if timestamp == LATEST:
            latest = (
                self.last_stable_offset
                if isolation_level == READ_COMMITTED
                else self.high_watermark
            )
            return latest, -1, log.leader_epoch_cache.latest_epoch
        if timestamp == LATEST_TIERED and log.tiered:
            return self._latest_tiered()
        if timestamp == EARLIEST_PENDING_UPLOAD and log.tiered:
            return self._earliest_pending_upload(isolation_level)
        if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            return NOT_FOUND  # not tiered
        if timestamp == MAX_TIMESTAMP:
            found = log.max_timestamp_entry()
        else:
            found = log.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= self.high_watermark:
            return NOT_FOUND
        return found

    def _earliest_remote(self) -> tuple[int, int, int]:
        assert self.log.remote is not None
        first = self.log.remote.copied[0]
        if first.start_offset >= self.log_start_offset:  # (local data starts no later)
            start = self.log_start_offset
            return start, -1, self.log.epoch_for_offset(start)
        return first.start_offset, -1, first.epoch_for_offset(first.start_offset)

    def _latest_tiered(self) -> tuple[int, int, int]:
        """Kafka's LATEST_TIERED_TIMESTAMP: the highest offset copied to remote storage (-1
        when none is), with its leader epoch."""
        assert self.log.remote is not None
        copied = self.log.remote.copied
        if not copied:
            return -1, -1, -1
        last = copied[-1]
        return last.end_offset, -1, last.epoch_for_offset(last.end_offset)

    def _earliest_pending_upload(self, isolation_level: int) -> tuple[int, int, int]:
        """Kafka's EARLIEST_PENDING_UPLOAD_TIMESTAMP (KIP-1023): the first offset not copied
        to remote storage; the log start while nothing was ever copied, and -1 when the
        local log starts past the log start although no copy is known here."""
        copied_to = self._latest_tiered()[0]
        if copied_to == -1:
            if self.log_start_offset == self.earliest_offset:
                return self._offset_for_timestamp(EARLIEST, isolation_level)
            return NOT_FOUND
        offset = max(copied_to + 1, self.earliest_offset)
        return offset, -1, self.log.epoch_for_offset(offset)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch: (error, epoch, end offset) from the leader epoch cache."""
        error = self.check_leader(current_leader_epoch)
        if error is not ErrorCode.none:
            return error, UNDEFINED_EPOCH, UNKNOWN_OFFSET
        cache = self.log.leader_epoch_cache
        if self.remote_log_start_offset is not None:  # the epochs of the remote tier too
            cache = self._epochs_across_tiers()
        epoch, end_offset = cache.end_offset_for(leader_epoch, self.log_end_offset)
        return ErrorCode.none, epoch, end_offset

    def _epochs_across_tiers(self) -> LeaderEpochCache:
        """The remote segments' leader epochs (as uploaded with each) before the local
        cache's, whose first entry starts at the local log start (Kafka's OffsetForLeaderEpoch
        with tiered storage); an in-memory cache, never written."""
        starts: dict[int, int] = {}
        assert self.log.remote is not None
        for metadata in self.log.remote.copied:
            for epoch, start in metadata.segment_leader_epochs:
                starts[epoch] = min(starts.get(epoch, start), start)
        for entry in self.log.leader_epoch_cache.entries:
            starts[entry.epoch] = min(
                starts.get(entry.epoch, entry.start_offset), entry.start_offset
            )
        entries = [EpochEntry(epoch, start) for epoch, start in sorted(starts.items())]
        return LeaderEpochCache(self.log.leader_epoch_cache.path, entries)

    def delete_records_on_leader(self, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords: move the log start to `offset` (-1: the high watermark)."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower, -1
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            return ErrorCode.offset_out_of_range, -1
        self.log.delete_records_before(offset)
        return ErrorCode.none, self.earliest_offset

    def low_watermark(self, alive: Container[int]) -> int:
        """Kafka's lowWatermarkIfLeader: the lowest log start of this replica and every
        follower on a live broker (-1 for one that has not fetched since this leader began);
        DeleteRecords answers once it reaches the requested offset."""
        low = self.earliest_offset
        for replica in self.remote_replicas.values():
            if replica.broker_id in alive:
                low = min(low, replica.log_start_offset)
        return low

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower follows the leader's log start (Kafka's fetcher calls
        maybeIncrementLogStartOffset), never past its own high watermark. Tiered: it is
        the leader's local log start, so it moves the local one only (below it, the
        segments are uploaded: the leader deleted them locally only then)."""
        offset = min(leader_log_start_offset, self.high_watermark)
        if offset > self.log_start_offset:
            self.log.delete_records_before(offset, across_tiers=not self.log.tiered)

    # -- follower data path ----------------------------------------------------------------

    def append_records_to_follower(self, records: bytes, now_ms: int) -> ErrorCode | StorageError:
        """Append batches fetched from the leader as they are (Kafka's appendRecordsToFollower).
        NONE on success; a leader refuses (it takes appends from producers only)."""
        if self.is_leader:
            return ErrorCode.not_leader_or_follower
        try:
            self.log.append_as_follower(records, now_ms)
        except StorageError as exc:
            return exc
        return ErrorCode.none

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower takes the high watermark from the leader's fetch answers, never beyond
        its own log end."""
        if not self.is_leader:
            self.high_watermark = max(0, min(leader_high_watermark, self.log_end_offset))

    def truncate_to(self, offset: int) -> None:
        """Drop everything from `offset` on (a follower diverging from its leader)."""
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Start over empty at the leader's log start (Kafka's truncateFullyAndStartAt)."""
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    def truncate_fully_and_restore_remote_aux_state(
        self, offset: int, epochs: list[EpochEntry], producer_snapshot: bytes | None
    ) -> None:
        """Start over empty at `offset` with the leader epochs and producer snapshot of the
        remote segment ending before it (OFFSET_MOVED_TO_TIERED_STORAGE)."""
        self.truncate_fully_and_start_at(offset)
        self.log.restore_remote_aux_state(epochs, producer_snapshot)

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int) -> tuple[int, bool]:
        """Where a follower must truncate, given the leader's OffsetForLeaderEpoch answer for
        the follower's latest epoch (Kafka's AbstractFetcherThread.getOffsetTruncationState).

        Returns (offset, complete); not complete means ask again for the epoch the follower
        now ends in, as its log and the leader's may diverge earlier still. Never by high
        watermark alone (KIP-101).
        """
        log_end = self.log_end_offset
        if leader_end_offset == UNKNOWN_OFFSET:
            return min(self.high_watermark, log_end), True  # a leader without epochs
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_end_offset, log_end), True
        cache = self.log.leader_epoch_cache
        follower_epoch, follower_end = cache.end_offset_for(leader_epoch, log_end)
        if follower_end == UNKNOWN_OFFSET:  # no epoch of the follower's is that old
            return min(leader_end_offset, log_end), True
        if follower_epoch != leader_epoch:
            # The follower never had the leader's epoch: cut to where its own earlier epoch
            # ends, then compare again from there.
            return min(follower_end, log_end), False
        return min(leader_end_offset, follower_end, log_end), True


def diverging_epoch(
    log: UnifiedLog, fetch_offset: int, last_fetched_epoch: int
) -> tuple[int, int] | None:
    """Kafka's validateFetchOffsetAndEpoch: where the fetcher's last epoch ends in `log`, if
    that is before its fetch offset (or the log never had that epoch)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = log.leader_epoch_cache.end_offset_for(
        last_fetched_epoch, log.log_end_offset
    )
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None
