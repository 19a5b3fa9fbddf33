"""One host for every coordinator whose state lives in an internal topic (Kafka's
CoordinatorRuntime, from its coordinator-common module).

A coordinator kind (groups over `__consumer_offsets`, transactions over
`__transaction_state`, next share groups over `__share_group_state`) is a sans-IO state
machine plus a `CoordinatorShard` adapter that replays its records and forgets a partition's
keys. The runtime does the rest, the same way for each kind:
* creates the internal topic on first use with the kind's configs;
* serves the partitions this broker leads: a partition it is elected leader of is read to its
  log end (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and installed only if that election still
  holds; one it stops leading is dropped (NOT_COORDINATOR). The coordinator epoch is the
  partition's leader epoch;
* appends the records the state machine returns with acks=all, and answers only what is
  committed: `defer` runs a callback, and `committed` returns, once the partition's high
  watermark has passed every record written to it so far (Kafka's deferred event queue,
  completed by a high-watermark listener: here a `DelayedCommit` in the produce purgatory,
  retried whenever the partition's high watermark may have moved). A request that wrote
  nothing still waits for the writes before it, so nobody is shown state that a leader
  change could undo;
* reverts a partition whose append failed outright (nothing was written, but the state
  machine already changed): it is reloaded from its log, as Kafka reverts to the last
  written snapshot.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions
from kafkalite.broker.delayed import DelayedOperation, TopicPartition
from kafkalite.broker.partition_loader import Batch, PartitionLoader, log_chunks
from kafkalite.coordinator.partitioning import group_partition
from kafkalite.storage.batch import TRANSACTIONAL_FLAG
from kafkalite.storage.records import encode_batch

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager

log = logging.getLogger("kafkalite.broker.coordinator_runtime")

KeyValue = tuple[bytes, bytes | None]
Callback = Callable[[ErrorCode], None]


class CoordinatorShard(Protocol):
    """What a coordinator kind gives the runtime (Kafka's CoordinatorShard)."""

    def replay(self, index: int, batches: list[Batch]) -> int:
        """Install a loaded partition's records; returns how many were replayed."""
        ...

    def unload(self, index: int) -> None:
        """Forget every key of the partition (its waiters answer NOT_COORDINATOR)."""
        ...


@dataclass(frozen=True)
class InternalTopic:
    """How the runtime creates its topic on first use (Kafka's fixed internal-topic configs)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]


class DelayedCommit(DelayedOperation):
    """A coordinator write until it is committed: the partition's high watermark reaches
    `required_offset` (NONE), or this broker stops leading the partition (NOT_COORDINATOR).
    Callbacks run once, at completion; it never expires (waiters bound their own wait)."""

    def __init__(
        self,
        tp: TopicPartition,
        required_offset: int,
        partition_of: Callable[[TopicPartition], Partition | None],
    ) -> None:
        super().__init__((tp,))
        self.tp = tp
        self.required_offset = required_offset
        self.error = ErrorCode.none
        self.callbacks: list[Callback] = []
        self._partition_of = partition_of

    def try_complete(self) -> bool:
        partition = self._partition_of(self.tp)
        if partition is None or not partition.is_leader:
            return self.fail(ErrorCode.not_coordinator)
        if partition.high_watermark >= self.required_offset:
            return self.force_complete()
        return False

    def fail(self, error: ErrorCode) -> bool:
        if self.completed:
            return False
        self.error = error
        return self.force_complete()

    def on_complete(self) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(self.error)


@dataclass(eq=False)
class CoordinatorRuntime:
    topic_spec: Callable[[], InternalTopic]
    replica_manager: ReplicaManager
    shard: CoordinatorShard
    partitions: CoordinatorPartitions = field(default_factory=CoordinatorPartitions)
    loader: PartitionLoader = field(init=False)
    # Writes not yet committed, per partition, oldest first.
    _writes: dict[int, list[DelayedCommit]] = field(default_factory=dict)
    _num_partitions: int = 0  # of the topic, as last known
    _create_failure: str = ""  # the last reason creating the topic failed, logged once

    def __post_init__(self) -> None:
        self.loader = PartitionLoader(
            self.topic, self.partitions, self.replica_manager.partition, self._install
        )

    @property
    def topic(self) -> str:
        return self.topic_spec().name

    # -- the internal topic ----------------------------------------------------------------

    def ensure_topic(self) -> ErrorCode:
        """Create the topic on first use, as Kafka does (the cluster's topics: this broker
        need not hold a replica of it)."""
        if self.topic in self.replica_manager.metadata.topics:
            return ErrorCode.none
        spec = self.topic_spec()
        outcome, _ = self.replica_manager.create_topic(
            spec.name, spec.num_partitions, spec.replication_factor, spec.configs
        )
        if outcome.error is ErrorCode.topic_already_exists:
            # Another broker created it first (brokers race on first use in a cluster).
            log.info("%s was created by another broker", spec.name)
            return ErrorCode.none
        if not outcome.ok:
            # Retriable (too few brokers alive yet, as a rolling start has): clients are told
            # COORDINATOR_NOT_AVAILABLE and ask again, as Kafka does. Said once, not per ask.
            reason = outcome.message or outcome.error.name
            if reason != self._create_failure:
                log.warning("cannot create %s yet: %s", spec.name, reason)
            self._create_failure = reason
            return ErrorCode.coordinator_not_available
        log.info("created %s", spec.name)
        return ErrorCode.none

    def partition_count(self) -> int:
        topic = self.replica_manager.metadata.topics.get(self.topic)
        return topic.num_partitions if topic is not None else self._num_partitions

    def partition_for(self, key: str) -> int:
        """Kafka's partitionFor: abs of Java's String.hashCode modulo the partition count."""
        return group_partition(key, max(self.partition_count(), 1))

    def check(self, key: str) -> ErrorCode:
        """NONE when this broker serves `key` now; else COORDINATOR_NOT_AVAILABLE (no
        topic), NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        if self.ensure_topic() is not ErrorCode.none:
            return ErrorCode.coordinator_not_available
        return self.partitions.error(self.partition_for(key))

    def epoch(self, index: int) -> int:
        """The coordinator epoch `index` is served in (its leader epoch; -1: not served)."""
        return self.partitions.epoch(index)

    def served(self) -> list[int]:
        return list(self.partitions.owned)

    # -- leadership (Kafka's onElection / onResignation, called by the ReplicaManager) -----

    def start(self) -> int | None:
        """At startup: load the partitions this broker leads, then follow leadership.
        Returns the records loaded (None: this broker has no replica of the topic)."""
        self.replica_manager.coordinators.append(self)
        topic = self.replica_manager.topics.get(self.topic)
        if topic is None:
            return None
        loaded = 0
        self._num_partitions = topic.metadata.num_partitions
        for partition in topic.partitions.values():
            index, epoch = partition.index, partition.leader_epoch
            if partition.is_leader and self.partitions.elect(index, epoch):
                batches = [b for chunk in log_chunks(partition.log) for b in chunk]
                loaded += self._install(index, epoch, batches, False)
        return loaded

    def on_election(self, topic: str, index: int, leader_epoch: int) -> None:
        if topic != self.topic or not self.partitions.elect(index, leader_epoch):
            return
        self._num_partitions = self.partition_count()
        self.loader.start(index, leader_epoch)

    def on_resignation(self, topic: str, index: int, leader_epoch: int | None) -> None:
        if topic != self.topic or not self.partitions.resign(index, leader_epoch):
            return
        self._unload(index)

    def _unload(self, index: int) -> None:
        for write in self._writes.pop(index, []):
            self.replica_manager.produce_purgatory.cancel(write)
            write.fail(ErrorCode.not_coordinator)
        self.shard.unload(index)

    def _install(self, index: int, epoch: int, batches: list[Batch], announce: bool) -> int:
        """Replay a loaded partition if its election still holds."""
        if not self.partitions.complete_load(index, epoch):
            return 0
        loaded = self.shard.replay(index, batches)
        if announce:  # not at startup or for an empty partition: one line for the topic
            log.info("loaded %d record(s) of %s-%d in epoch %d", loaded, self.topic, index, epoch)
        return loaded

    def _revert(self, index: int) -> None:
        """An append failed outright: reload the partition from its log (which lacks the
        failed write) in the current leader epoch, or drop it if this broker no longer leads
        it."""
        if not self.partitions.resign(index):
            return
        self._unload(index)
        partition = self.replica_manager.partition(self.topic, index)
        if partition is not None and partition.is_leader:
            self.partitions.elect(index, partition.leader_epoch)
            self.loader.start(index, partition.leader_epoch)

    # -- writes ----------------------------------------------------------------------------

    def append(
        self,
        index: int,
        records: list[KeyValue],
        *,
        timestamp_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> ErrorCode:
        """Append `records` to partition `index` with acks=all; a producer id makes it a
        transactional batch of that producer (coordinator-origin: no sequence numbers).
        NONE once written (`defer`/`committed` tell when it is committed); otherwise the
        append's error, and the partition was reverted."""
        if self.partitions.error(index) is not ErrorCode.none:
            return ErrorCode.not_coordinator
        transactional = producer_id >= 0
        batch = encode_batch(
            records,
            timestamp=timestamp_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            attributes=TRANSACTIONAL_FLAG if transactional else 0,
        )
        tp = (self.topic, index)
        results, delayed = self.replica_manager.append_records(
            {tp: batch}, -1, internal_topics_allowed=True, coordinator=transactional
        )
        error = results[tp].error
        if error is not ErrorCode.none or delayed is None:
            log.warning("cannot write %d record(s) to %s-%d: %s", len(records), *tp, error.name)
            if error is not ErrorCode.invalid_producer_epoch:  # a fenced batch changed nothing
                self._revert(index)
            return error
        write = DelayedCommit(tp, delayed.statuses[tp].required_offset, self._partition_of)
        if not self.replica_manager.produce_purgatory.try_complete_else_watch(write):
            self._writes.setdefault(index, []).append(write)
            write.callbacks.append(lambda _error: self._forget(index, write))
        return ErrorCode.none

    def _forget(self, index: int, write: DelayedCommit) -> None:
        writes = self._writes.get(index)
        if writes is not None and write in writes:
            writes.remove(write)
            if not writes:
                del self._writes[index]

    def _partition_of(self, tp: TopicPartition) -> Partition | None:
        return self.replica_manager.partition(*tp)

    def defer(self, index: int, callback: Callback) -> None:
        """Run `callback(error)` once every write to `index` so far is committed (NONE), or
        the partition is lost (NOT_COORDINATOR); at once when nothing is pending."""
        writes = self._writes.get(index)
        if not writes:
            callback(ErrorCode.none)
        else:
            writes[-1].callbacks.append(callback)

    async def committed(self, indexes: Iterable[int], timeout_ms: int) -> dict[int, ErrorCode]:
        """Wait until every write so far to each of `indexes` is committed: the partitions
        whose writes failed, with the error (REQUEST_TIMED_OUT past `timeout_ms`)."""
        failed: dict[int, ErrorCode] = {}
        waiting = [i for i in set(indexes) if self._writes.get(i)]
        if not waiting:
            return failed
        done = trio.Event()
        outcome: dict[int, ErrorCode] = {}

        def record(index: int, error: ErrorCode) -> None:
            outcome[index] = error
            if len(outcome) == len(waiting):
                done.set()

        for index in waiting:
            self.defer(index, functools.partial(record, index))
        with trio.move_on_after(max(timeout_ms, 0) / 1000):
            await done.wait()
        for index in waiting:
            error = outcome.get(index, ErrorCode.request_timed_out)
            if error is not ErrorCode.none:
                failed[index] = error
        return failed

    def pending_writes(self, index: int | None = None) -> int:
        """Writes not yet committed (of `index`, or of all); for tests and metrics."""
        if index is not None:
            return len(self._writes.get(index, ()))
        return sum(len(writes) for writes in self._writes.values())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loads elections ask for."""
        task_status.started()
        await self.loader.run()
