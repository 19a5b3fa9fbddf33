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
On start the topic is replayed; transactions left in PrepareCommit/PrepareAbort (a restart
between the two records) get their markers written and are completed. A timer task aborts
transactions older than their timeout and expires idle transactional ids.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.group_coordinator_service import log_records
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.broker.txn_marker_sender import RemoteMarkers
from kafkalite.broker.txn_verification import TxnVerifier
from kafkalite.coordinator import group_partition
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.records import encode_batch
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

    def __post_init__(self) -> None:
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

    # -- startup ---------------------------------------------------------------------------

    def load(self) -> None:
        """Replay `__transaction_state`, then finish what a restart interrupted."""
        topic = self.replica_manager.topics.get(TXN_STATE_TOPIC)
        if topic is not None:
            loaded = 0
            for partition in topic.partitions.values():
                for record in log_records(partition.log):
                    loaded += self._replay(record.key, record.value, record.offset)
            log.info("loaded %d record(s) from %s", loaded, TXN_STATE_TOPIC)
        self.coordinator.resume_after_load()
        self._after_call()

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
        """Create `__transaction_state` on first use, as Kafka does (known to the cluster
        metadata at once; hosted here only once the controller's state arrives, or never)."""
        if TXN_STATE_TOPIC in self.metadata.topics:
            return ErrorCode.none
        outcome, _ = self.replica_manager.create_topic(
            TXN_STATE_TOPIC,
            self.config.int("transaction.state.log.num.partitions"),
            self.config.int("transaction.state.log.replication.factor"),
            txn_state_topic_configs(self.config),
        )
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
        return ErrorCode.none

    def partition_for(self, transactional_id: str) -> int:
        topic = self.metadata.topics[TXN_STATE_TOPIC]
        return txn_partition(transactional_id, topic.num_partitions)

    # -- the entry point -------------------------------------------------------------------

    def call(self, operation: Callable[[TransactionCoordinator, int], T]) -> tuple[T, ErrorCode]:
        """Run `operation(coordinator, now_ms)`, then persist and write markers. Returns its
        result and NONE, or the error to answer when the state could not be persisted."""
        result = operation(self.coordinator, self.now_ms())
        return result, self._after_call()

    def _after_call(self) -> ErrorCode:
        error = self._persist()
        for job in self.coordinator.take_jobs():
            if self.markers.led_elsewhere(job):
                self.markers.send(job, self.coordinator.coordinator_epoch)
                continue
            self._write_markers(job)
            self.coordinator.complete(job, self.now_ms())
        error2 = self._persist()
        return error if error is not ErrorCode.none else error2

    def markers_acknowledged(self, job: MarkerJob) -> None:
        """Every marker of a transaction sent to other brokers is in: complete it."""
        self._complete_group_offsets(job)
        self.coordinator.complete(job, self.now_ms())
        self._persist()

    def _persist(self) -> ErrorCode:
        changed: list[tuple[str, TxnMetadata | None]] = [
            (meta.transactional_id, meta) for meta in self.coordinator.take_changes()
        ]
        changed += [(tid, None) for tid in self.coordinator.expired]
        self.coordinator.expired.clear()
        if not changed:
            return ErrorCode.none
        if self.ensure_state_topic() is not ErrorCode.none:
            return ErrorCode.coordinator_not_available
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for tid, meta in changed:
            value = None if meta is None else encode_value(meta)
            by_partition[self.partition_for(tid)].append((encode_key(tid), value))
        error = ErrorCode.none
        for index, records in by_partition.items():
            batch = encode_batch(records, timestamp=self.now_ms())
            tp = (TXN_STATE_TOPIC, index)
            results, _ = self.replica_manager.append_records(
                {tp: batch}, 1, internal_topics_allowed=True
            )
            if results[tp].error is not ErrorCode.none:
                log.error("cannot persist transaction state: %s", results[tp].error.name)
                error = ErrorCode.not_coordinator
        return error

    def _write_markers(self, job: MarkerJob) -> None:
        """WriteTxnMarkers to every partition of the transaction (in-process here), and the
        group side of its offsets."""
        marker = EndTxnMarker(job.commit, self.coordinator.coordinator_epoch)
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
        """Abort timed-out transactions and expire idle ids on Kafka's two periods."""
        abort_every = self.config.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        expire_every = self.config.int("transaction.remove.expired.transaction.cleanup.interval.ms")
        next_expiry = self.now_ms() + expire_every
        async with trio.open_nursery() as nursery:
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
