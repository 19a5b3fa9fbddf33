"""Delayed operations keyed by partition (Kafka's DelayedOperationPurgatory).

A request that cannot be answered yet (acks=all before the high watermark covers its
records; a fetch below min_bytes) is parked in a `Purgatory` under the partitions it waits
on. Whoever changes a partition (an append, a high watermark move) calls
`check_and_complete(tp)`, which retries only the operations watching that partition.
Expiry is the caller's clock: the trio side (broker/delayed_wait.py) calls `expire` when the
request's timeout passes. Sans-IO: this module decides, it never waits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkalite.broker.partition import UNDEFINED_EPOCH, UNKNOWN_OFFSET, LogReadResult, Partition
from kafkalite.storage.errors import RecordError
from kafkalite.storage.log import UnifiedLog
from kafkalite.storage.offset_metadata import LogOffsetMetadata

TopicPartition = tuple[str, int]


class DelayedOperation:
    """Kafka's DelayedOperation: completes once, by `try_complete` or by expiry."""

    def __init__(self, keys: Iterable[TopicPartition]) -> None:
        self.keys = tuple(keys)
        self.completed = False
        self.expired = False
        self.waker: Callable[[], None] = lambda: None  # set by whoever waits for it

    def try_complete(self) -> bool:
        """Check the condition; when it holds, `force_complete` and return True."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Fill in the answer (runs exactly once, on completion or expiry)."""

    def on_expiration(self) -> None:
        """Adjust the answer for a timeout (runs before `on_complete`)."""

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        self.on_complete()
        self.waker()
        return True


class Purgatory:
    """Operations waiting on partitions, retried when one of their partitions changes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[TopicPartition, list[DelayedOperation]] = defaultdict(list)

    def try_complete_else_watch(self, operation: DelayedOperation) -> bool:
        """Complete now if possible; otherwise park it under each of its keys."""
        if operation.try_complete():
            return True
        for key in operation.keys:
            self._watchers[key].append(operation)
        return False

    def check_and_complete(self, key: TopicPartition) -> int:
        """Retry the operations watching `key`; returns how many completed."""
        watching = self._watchers.get(key)
        if not watching:
            return 0
        completed = [op for op in list(watching) if op.completed or op.try_complete()]
        for operation in completed:
            self._unwatch(operation)
        return len(completed)

    def expire(self, operation: DelayedOperation) -> bool:
        """The operation's timeout passed: answer it as expired (False if already done)."""
        self._unwatch(operation)
        if operation.completed:
            return False
        operation.expired = True
        operation.on_expiration()
        return operation.force_complete()

    def cancel(self, operation: DelayedOperation) -> None:
        """Forget the operation without answering (its requester is gone)."""
        self._unwatch(operation)

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in operation.keys:
            watching = self._watchers.get(key)
            if watching is None:
                continue
            if operation in watching:
                watching.remove(operation)
            if not watching:
                del self._watchers[key]

    def watched(self, key: TopicPartition | None = None) -> int:
        """Operations parked (under `key`, or in all); for tests and metrics."""
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len({id(op) for ops in self._watchers.values() for op in ops})


# -- produce -----------------------------------------------------------------------------------


@dataclass(slots=True)
class ProduceResult:
    """One partition's answer to a produce (Kafka's PartitionResponse)."""

    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[RecordError, ...] = ()  # KIP-467: the records a validation refused


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int  # the high watermark must reach this (last offset + 1)
    result: ProduceResult
    acks_pending: bool = True
    # A held batch (delayed delivery): its partition's store high watermark must reach this.
    store_required_offset: int = -1


class FetchedPartition(Protocol):
    """What a parked fetch asks of a partition it reads: a Partition, or the delay store a
    follower fetches as a pseudo-partition (broker/delay_store_replica.py)."""

    @property
    def log(self) -> UnifiedLog: ...

    def fetch_upper_bound_metadata(
        self, current_leader_epoch: int, replica_id: int, isolation_level: int
    ) -> LogOffsetMetadata | ErrorCode: ...

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]: ...


class DelayedProduce(DelayedOperation):
    """acks=all: answered when the high watermark covers every partition's append (Kafka's
    DelayedProduce). NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
    min.insync.replicas meanwhile; REQUEST_TIMED_OUT for partitions still pending at expiry."""

    def __init__(
        self,
        statuses: Mapping[TopicPartition, ProducePartitionStatus],
        partition: Callable[[TopicPartition], Partition | None],
        min_isr: Callable[[TopicPartition], int],
        store_high_watermark: Callable[[TopicPartition], int] = lambda tp: -1,
    ) -> None:
        super().__init__(tp for tp, status in statuses.items() if status.acks_pending)
        self.statuses = dict(statuses)
        self._partition = partition
        self._min_isr = min_isr
        self._store_high_watermark = store_high_watermark

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._partition(tp)
            if partition is None:
                done, error = True, ErrorCode.unknown_topic_or_partition
            else:
                done, error = partition.check_enough_replicas_reach_offset(
                    status.required_offset, self._min_isr(tp)
                )
                if done and status.store_required_offset >= 0 and error is ErrorCode.none:
                    # A held batch: replicated once the store's copies in the ISR have it.
                    done = self._store_high_watermark(tp) >= status.store_required_offset
            if done or error is not ErrorCode.none:
                status.acks_pending = False
                status.result.error = error
        if any(status.acks_pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending = False
                status.result.error = ErrorCode.request_timed_out

    @property
    def results(self) -> dict[TopicPartition, ProduceResult]:
        return {tp: status.result for tp, status in self.statuses.items()}


# -- delete records ----------------------------------------------------------------------------


@dataclass(slots=True)
class DeleteRecordsStatus:
    required_offset: int  # every live replica's log start must reach this
    error: ErrorCode = ErrorCode.none
    low_watermark: int = -1
    pending: bool = True


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords: answered when the low watermark (the lowest log start of the live
    replicas, which followers report in their fetches) reaches the requested offset on every
    partition (Kafka's DelayedDeleteRecords); REQUEST_TIMED_OUT, low watermark -1, for those
    still pending at expiry."""

    def __init__(
        self,
        statuses: Mapping[TopicPartition, DeleteRecordsStatus],
        partition: Callable[[TopicPartition], Partition | None],
        alive: Callable[[], Container[int]],
    ) -> None:
        super().__init__(tp for tp, status in statuses.items() if status.pending)
        self.statuses = dict(statuses)
        self._partition = partition
        self._alive = alive

    def try_complete(self) -> bool:
        alive = self._alive()
        for tp, status in self.statuses.items():
            if not status.pending:
                continue
            partition = self._partition(tp)
            if partition is None:
                status.pending, status.error = False, ErrorCode.unknown_topic_or_partition
            elif not partition.is_leader:
                status.pending, status.error = False, ErrorCode.not_leader_or_follower
            else:
                low_watermark = partition.low_watermark(alive)
                if low_watermark >= status.required_offset:
                    status.pending, status.low_watermark = False, low_watermark
        if any(status.pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.pending:
                status.pending, status.error = False, ErrorCode.request_timed_out


# -- fetch -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchInfo:
    """One partition of a fetch (Kafka's FetchRequest.PartitionData)."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # followers, Fetch v12+: checked for divergence
    log_start_offset: int = -1  # followers: their own log start (DeleteRecords waits on it)

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.partition


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What applies to the whole fetch (Kafka's FetchParams)."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0
    replica_id: int = -1

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class FetchRead:
    """One pass over a fetch's partitions: results in request order."""

    results: tuple[LogReadResult, ...] = field(default_factory=tuple)

    @property
    def bytes_read(self) -> int:
        return sum(len(result.records) for result in self.results)

    @property
    def has_error(self) -> bool:
        return any(result.error is not ErrorCode.none for result in self.results)

    @property
    def has_diverging_epoch(self) -> bool:
        return any(result.diverging_epoch is not None for result in self.results)

    @property
    def has_remote_fetch(self) -> bool:
        return any(result.remote_fetch is not None for result in self.results)


class DelayedFetch(DelayedOperation):
    """A fetch below min_bytes (Kafka's fetchMessages and DelayedFetch).

    The first `try_complete` reads (the fetch's own read); when that is short of min_bytes
    the fetch parks with the position of each fetch offset. Retries then read nothing: they
    compare those positions with where each partition's readable end now is (log end,
    high watermark or last stable offset) and add up the bytes in between. The records are
    read once more, when the fetch completes or expires."""

    def __init__(
        self,
        params: FetchParams,
        infos: Iterable[FetchInfo],
        read: Callable[[], FetchRead],
        partition: Callable[[TopicPartition], FetchedPartition | None],
        key_of: Callable[[TopicPartition], TopicPartition] = lambda tp: tp,
    ) -> None:
        self.infos = tuple(infos)
        # Watched under the partitions whose appends it waits for (a view's: its source's).
        super().__init__(dict.fromkeys(key_of(info.tp) for info in self.infos))
        self.params = params
        self._read = read
        self._partition = partition
        self.read_result = FetchRead()
        # Where each fetch offset sits; None until the first read came back short.
        self._start: tuple[tuple[FetchInfo, LogOffsetMetadata], ...] | None = None

    def satisfied(self, read: FetchRead) -> bool:
        """Kafka's fetchMessages: answer at once on errors or a diverging epoch, or once
        min_bytes are there."""
        return (
            self.params.max_wait_ms <= 0
            or not self.keys
            or read.has_error
            or read.has_diverging_epoch
            or read.has_remote_fetch  # answered once remote storage has been read
            or read.bytes_read >= self.params.min_bytes
        )

    def try_complete(self) -> bool:
        if self._start is None:
            read = self._read()
            if self.satisfied(read):
                self.read_result = read
                return self.force_complete()
            self._start = tuple((info, self._start_metadata(info)) for info in self.infos)
            return False
        if self._can_answer():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self._start is not None:  # parked: read what there is now
            self.read_result = self._read()

    def _start_metadata(self, info: FetchInfo) -> LogOffsetMetadata:
        partition = self._partition(info.tp)
        if partition is None:
            return LogOffsetMetadata(info.fetch_offset)
        return partition.log.offset_metadata(info.fetch_offset)

    def _can_answer(self) -> bool:
        """Kafka's DelayedFetch.tryComplete: a partition that cannot be fetched here any more
        (cases A-E), a fetch offset past the readable end or on an older segment (F), or a
        diverging epoch (H) answers at once; otherwise the bytes between each fetch offset
        and its readable end (at most the partition's max_bytes) must add up to min_bytes
        (G)."""
        assert self._start is not None
        accumulated = 0
        for info, start in self._start:
            if start.message_offset_only:
                continue
            partition = self._partition(info.tp)
            if partition is None:
                return True
            end = partition.fetch_upper_bound_metadata(
                info.current_leader_epoch, self.params.replica_id, self.params.isolation_level
            )
            if isinstance(end, ErrorCode):
                return True
            if end.on_older_segment(start):
                return True  # the log was truncated below the fetch offset's segment
            if start.on_older_segment(end):
                return True  # behind the active segment, or it just rolled
            if start.message_offset < end.message_offset:
                accumulated += min(end.position_diff(start), info.max_bytes)
            # A fetch offset past the bound in the same segment (a new leader's high
            # watermark catching up) waits, as Kafka's: answering it would loop the client.
            if self._diverged(partition, info):
                return True
        return accumulated >= self.params.min_bytes

    @staticmethod
    def _diverged(partition: FetchedPartition, info: FetchInfo) -> bool:
        """Kafka's case H: a follower's last fetched epoch no longer ends at or after its
        fetch offset here (the leader's log changed while the fetch was parked)."""
        if info.last_fetched_epoch < 0:
            return False
        error, epoch, end_offset = partition.last_offset_for_leader_epoch(
            info.current_leader_epoch, info.last_fetched_epoch
        )
        return (
            error is not ErrorCode.none
            or epoch == UNDEFINED_EPOCH
            or end_offset == UNKNOWN_OFFSET
            or epoch < info.last_fetched_epoch
            or end_offset < info.fetch_offset
        )
