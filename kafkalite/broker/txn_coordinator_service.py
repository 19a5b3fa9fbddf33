"""The trio side of the transaction coordinator: durable state and marker writing.

The sans-IO `TransactionCoordinator` decides everything; handlers reach it only through
`call`, which then
* persists every changed transaction in `__transaction_state` (compacted, partition = hash
  of the transactional id, Kafka's record format) before the request is answered,
* writes the commit/abort markers of every transaction that entered PrepareCommit /
  PrepareAbort to its partitions through the ReplicaManager (in-process WriteTxnMarkers
  when this broker leads them all; otherwise WriteTxnMarkers to each leader through
  broker/txn_marker_sender.py, later), applies or drops the transaction's pending offsets
  in the group coordinator, and persists CompleteCommit / CompleteAbort.
State is written with acks=all; InitProducerId and EndTxn are answered once it is
replicated. The coordinator of an id is the leader of its partition (Kafka's onElection /
onResignation, called by the ReplicaManager): a partition this broker becomes leader of is
read to its log end (COORDINATOR_LOAD_IN_PROGRESS meanwhile), then transactions left in
PrepareCommit/PrepareAbort get their markers written and are completed; one it stops leading
is forgotten (NOT_COORDINATOR). The coordinator epoch of its markers is the partition's
leader epoch. A timer task aborts transactions older than their timeout and expires idle
transactional ids.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions
from kafkalite.broker.delayed import DelayedProduce
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.group_coordinator_service import coordinator_append_error
from kafkalite.broker.partition_loader import Batch, PartitionLoader, log_chunks
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.broker.txn_marker_sender import RemoteMarkers
from kafkalite.broker.txn_verification import TxnVerifier
from kafkalite.coordinator import group_partition
from kafkalite.storage.batch import BatchHeader
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.records import Record, decode_records, encode_batch
from kafkalite.txn.coordinator import MarkerJob, TransactionCoordinator, TxnMetadata
from kafkalite.txn.records import (
    InvalidTxnRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

if TYPE_CHECKING:
    from kafkalite.broker.cluster_metadata import ClusterMetadata
    from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.config import BrokerConfig
    from kafkalite.coordinator import GroupCoordinator

log = logging.getLogger("kafkalite.txn")

TXN_STATE_TOPIC = "__transaction_state"
T = TypeVar("T")


def txn_state_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """Kafka's fixed settings of `__transaction_state` (TransactionLog's topic configs)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(config.int("transaction.state.log.min.isr")),
        "segment.bytes": str(config.int("transaction.state.log.segment.bytes")),
    }


def txn_append_error(error: ErrorCode) -> ErrorCode:
    """What a failed `__transaction_state` append answers (Kafka's TransactionStateManager:
    too large is UNKNOWN_SERVER_ERROR, the rest as the group coordinator maps them)."""
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return coordinator_append_error(error)


def txn_partition(transactional_id: str, num_partitions: int) -> int:
    """Kafka's partitionFor: the same hash as groups' (abs of Java's hashCode)."""
    return group_partition(transactional_id, num_partitions)


@dataclass(eq=False)
class TransactionCoordinatorService:
    config: BrokerConfig
    replica_manager: ReplicaManager
    groups: GroupCoordinatorService
    metadata: ClusterMetadata
    coordinator: TransactionCoordinator = field(init=False)
    markers: RemoteMarkers = field(init=False)
    verifier: TxnVerifier = field(init=False)
    # The `__transaction_state` partitions this broker serves, and the loads to run.
    partitions: CoordinatorPartitions = field(default_factory=CoordinatorPartitions)
    loader: PartitionLoader = field(init=False)
    _num_partitions: int = 0  # of `__transaction_state`, as last known

    def __post_init__(self) -> None:
        self.loader = PartitionLoader(
            TXN_STATE_TOPIC, self.partitions, self.replica_manager.partition, self._install_loaded
        )
        self.markers = RemoteMarkers(self)
        self.verifier = TxnVerifier(
            self.config.broker_id,
            self.coordinator_for,
            self.markers.endpoint_of,
            self.config.int("request.timeout.ms"),
        )
        self.coordinator = TransactionCoordinator(
            self.metadata.allocate_producer_id,
            max_timeout_ms=self.config.int("transaction.max.timeout.ms"),
            id_expiration_ms=self.config.int("transactional.id.expiration.ms"),
        )

    def now_ms(self) -> int:
        return self.replica_manager.clock_ms()

    # -- loading and unloading (Kafka's onElection / onResignation) -------------------------

    def load(self) -> None:
        """At startup: load the `__transaction_state` partitions this broker leads and finish
        what a restart interrupted, then follow leadership changes."""
        topic = self.replica_manager.topics.get(TXN_STATE_TOPIC)
        if topic is not None:
            self._num_partitions = topic.metadata.num_partitions
            loaded = 0
            for partition in topic.partitions.values():
                index, epoch = partition.index, partition.leader_epoch
                if partition.is_leader and self.partitions.elect(index, epoch):
                    records = [r for chunk in log_chunks(partition.log) for r in _records(chunk)]
                    loaded += self._install(index, epoch, records, complete=False)
            log.info("loaded %d record(s) from %s", loaded, TXN_STATE_TOPIC)
        self.coordinator.resume_after_load()
        self._after_call()
        self.replica_manager.coordinators.append(self)

    def on_election(self, topic: str, index: int, leader_epoch: int) -> None:
        if topic != TXN_STATE_TOPIC or not self.partitions.elect(index, leader_epoch):
            return
        self._num_partitions = self._partition_count()
        self.loader.start(index, leader_epoch)

    def on_resignation(self, topic: str, index: int, leader_epoch: int | None) -> None:
        if topic != TXN_STATE_TOPIC or not self.partitions.resign(index, leader_epoch):
            return
        count = self._num_partitions
        dropped = self.coordinator.unload(lambda tid: txn_partition(tid, count) == index)
        log.info("unloaded %d transactional id(s) of %s-%d", len(dropped), topic, index)

    def _partition_count(self) -> int:
        topic = self.replica_manager.metadata.topics.get(TXN_STATE_TOPIC)
        return topic.num_partitions if topic is not None else self._num_partitions

    def _install_loaded(self, index: int, epoch: int, batches: list[Batch], announce: bool) -> int:
        return self._install(index, epoch, _records(batches), announce=announce)

    def _install(
        self,
        index: int,
        epoch: int,
        records: list[Record],
        *,
        complete: bool = True,
        announce: bool = False,
    ) -> int:
        """Replay a loaded partition; with `complete`, finish its transactions left in
        PrepareCommit/PrepareAbort (Kafka's loader completes them on load)."""
        if not self.partitions.complete_load(index, epoch):
            return 0
        loaded = sum(self._replay(r.key, r.value, r.offset) for r in records)
        if announce:  # not at startup or for an empty partition: one line for the topic
            log.info(
                "loaded %d record(s) of %s-%d in epoch %d", loaded, TXN_STATE_TOPIC, index, epoch
            )
        if complete:  # only this partition's: others' markers may be in flight
            self.coordinator.resume_after_load(lambda tid: self.partition_for(tid) == index)
            self._after_call()
        return loaded

    def _replay(self, key: bytes | None, value: bytes | None, offset: int) -> int:
        if key is None:
            return 0
        try:
            tid = decode_key(key)
            self.coordinator.load(tid, None if value is None else decode_value(tid, value))
        except (InvalidTxnRecord, UnicodeDecodeError, KeyError) as exc:
            log.warning("skipping %s record at %d: %s", TXN_STATE_TOPIC, offset, exc)
            return 0
        return 1

    def ensure_state_topic(self) -> ErrorCode:
        """Create `__transaction_state` on first use, as Kafka does (the cluster's topics:
        this broker need not hold a replica of it)."""
        if TXN_STATE_TOPIC in self.replica_manager.metadata.topics:
            return ErrorCode.none
        outcome, _ = self.replica_manager.create_topic(
            TXN_STATE_TOPIC,
            self.config.int("transaction.state.log.num.partitions"),
            self.config.int("transaction.state.log.replication.factor"),
            txn_state_topic_configs(self.config),
        )
        if outcome.error is ErrorCode.topic_already_exists:
            # Another broker created it first (brokers race on first use in a cluster).
            log.info("%s was created by another broker", TXN_STATE_TOPIC)
            return ErrorCode.none
        if not outcome.ok:
            log.error("cannot create %s: %s", TXN_STATE_TOPIC, outcome.message)
            return ErrorCode.coordinator_not_available
        log.info("created %s", TXN_STATE_TOPIC)
        return ErrorCode.none

    def coordinator_for(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the leader of the id's `__transaction_state` partition,
        creating the topic on first use (Kafka's FindCoordinator)."""
        error = self.ensure_state_topic()
        if error is not ErrorCode.none:
            return error, -1
        index = self.partition_for(transactional_id)
        state = self.metadata.partition_state(TXN_STATE_TOPIC, index)
        if state is None or state.leader < 0:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, state.leader

    def check_coordinator(self, transactional_id: str) -> ErrorCode:
        """NOT_COORDINATOR unless this broker leads the id's partition (the coordinator
        moves with `__transaction_state` leadership, as the group coordinator does)."""
        if not transactional_id:
            return ErrorCode.invalid_request
        error, leader = self.coordinator_for(transactional_id)
        if error is not ErrorCode.none:
            return error
        partition = self.replica_manager.partition(
            TXN_STATE_TOPIC, self.partition_for(transactional_id)
        )
        if leader != self.config.broker_id or partition is None or not partition.is_leader:
            return ErrorCode.not_coordinator
        return self.partitions.error(self.partition_for(transactional_id))

    def partition_for(self, transactional_id: str) -> int:
        return txn_partition(transactional_id, self._partition_count())

    # -- the entry point -------------------------------------------------------------------

    def call(self, operation: Callable[[TransactionCoordinator, int], T]) -> tuple[T, ErrorCode]:
        """Run `operation(coordinator, now_ms)`, then persist and write markers. Returns its
        result and NONE, or the error to answer when the state could not be persisted."""
        result = operation(self.coordinator, self.now_ms())
        return result, self._after_call()

    async def call_and_wait(
        self, operation: Callable[[TransactionCoordinator, int], T]
    ) -> tuple[T, ErrorCode]:
        """`call`, answered once the state it changed is replicated; markers are written
        only after a PrepareCommit/PrepareAbort is (Kafka's EndTxn)."""
        result = operation(self.coordinator, self.now_ms())
        error, pending = self._persist()
        if error is ErrorCode.none:
            error = await self._await_appends(pending)
        return result, self._finish(error)

    def _after_call(self) -> ErrorCode:
        error, _ = self._persist()  # acks=all appends, not waited for
        return self._finish(error)

    def _finish(self, error: ErrorCode) -> ErrorCode:
        """Write the markers of transactions that entered PrepareCommit/PrepareAbort and
        persist their completion; not for ids whose partition this broker no longer serves
        (their new coordinator completes them when it loads the partition)."""
        for job in self.coordinator.take_jobs():
            epoch = self.coordinator_epoch_for(job.transactional_id)
            if epoch < 0:
                continue
            if self.markers.led_elsewhere(job):
                self.markers.send(job, epoch)
                continue
            self._write_markers(job)
            self.coordinator.complete(job, self.now_ms())
        error2, _ = self._persist()
        return error if error is not ErrorCode.none else error2

    def coordinator_epoch_for(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's markers: the leader epoch of its partition, so
        partition leaders fence a deposed coordinator's late markers (-1: not served here)."""
        return self.partitions.epoch(self.partition_for(transactional_id))

    def markers_acknowledged(self, job: MarkerJob) -> None:
        """Every marker of a transaction sent to other brokers is in: complete it."""
        self._complete_group_offsets(job)
        self.coordinator.complete(job, self.now_ms())
        self._persist()

    async def _await_appends(
        self, pending: list[tuple[tuple[str, int], DelayedProduce]]
    ) -> ErrorCode:
        error = ErrorCode.none
        timeout_ms = self.config.int("request.timeout.ms")
        for tp, delayed in pending:
            await complete_or_expire(self.replica_manager.produce_purgatory, delayed, timeout_ms)
            result = delayed.results[tp].error
            if result is not ErrorCode.none:
                log.warning("transaction state on %s-%d: %s", *tp, result.name)
                error = txn_append_error(result)
        return error

    def _persist(self) -> tuple[ErrorCode, list[tuple[tuple[str, int], DelayedProduce]]]:
        changed: list[tuple[str, TxnMetadata | None]] = [
            (meta.transactional_id, meta) for meta in self.coordinator.take_changes()
        ]
        changed += [(tid, None) for tid in self.coordinator.expired]
        self.coordinator.expired.clear()
        if not changed:
            return ErrorCode.none, []
        if self.ensure_state_topic() is not ErrorCode.none:
            return ErrorCode.coordinator_not_available, []
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for tid, meta in changed:
            value = None if meta is None else encode_value(meta)
            by_partition[self.partition_for(tid)].append((encode_key(tid), value))
        error, pending = ErrorCode.none, []
        for index, records in by_partition.items():
            tp = (TXN_STATE_TOPIC, index)
            if self.partitions.error(index) is not ErrorCode.none:
                error = ErrorCode.not_coordinator  # lost meanwhile: the new leader has it
                continue
            batch = encode_batch(records, timestamp=self.now_ms())
            # acks=all, as Kafka writes transaction state (required acks -1).
            results, delayed = self.replica_manager.append_records(
                {tp: batch}, -1, internal_topics_allowed=True
            )
            if results[tp].error is not ErrorCode.none:
                log.warning("cannot persist transaction state: %s", results[tp].error.name)
                error = txn_append_error(results[tp].error)
            elif delayed is not None:
                pending.append((tp, delayed))
        return error, pending

    def _write_markers(self, job: MarkerJob) -> None:
        """WriteTxnMarkers to every partition of the transaction (in-process here), and the
        group side of its offsets."""
        marker = EndTxnMarker(job.commit, self.coordinator_epoch_for(job.transactional_id))
        for tp in sorted(job.partitions):
            error = self.replica_manager.append_txn_marker(
                tp, job.producer_id, job.producer_epoch, marker
            )
            if error not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                # Kafka retries until the partition is gone; on one node the log refuses
                # only a fenced epoch, which a newer marker already superseded.
                log.warning("marker for %s on %s: %s", job.transactional_id, tp, error.name)
        self._complete_group_offsets(job)

    def _complete_group_offsets(self, job: MarkerJob) -> None:
        offsets_partitions = {index for topic, index in job.partitions if topic == OFFSETS_TOPIC}
        if not offsets_partitions:
            return

        def complete(coordinator: GroupCoordinator, now_ms: int) -> None:
            for group_id in coordinator.pending_txn_groups(job.producer_id):
                coordinator.complete_txn(group_id, job.producer_id, job.commit, now_ms)

        self.groups.call(complete)

    # -- timers ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loads, the marker sender, and the timers: abort timed-out transactions and
        expire idle ids on Kafka's two periods."""
        abort_every = self.config.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        expire_every = self.config.int("transaction.remove.expired.transaction.cleanup.interval.ms")
        next_expiry = self.now_ms() + expire_every
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.loader.run)
            await nursery.start(self.markers.sender.run)
            task_status.started()
            await self._timers(abort_every, expire_every, next_expiry)

    async def _timers(self, abort_every: int, expire_every: int, next_expiry: int) -> None:
        while True:
            await trio.sleep(abort_every / 1000)
            now = self.now_ms()
            try:
                self.call(lambda c, now_ms: c.abort_timed_out(now_ms))
                if now >= next_expiry:
                    next_expiry = now + expire_every
                    self.call(lambda c, now_ms: c.expire_ids(now_ms))
            except Exception:
                log.exception("transaction coordinator timers failed")


def _records(chunk: list[tuple[BatchHeader, memoryview]]) -> list[Record]:
    """The data records of a chunk of batches (control batches skipped)."""
    return [r for header, batch in chunk if not header.is_control for r in decode_records(batch)]
