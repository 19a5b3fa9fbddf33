"""The transaction coordinator on the coordinator runtime: an adapter between the sans-IO
`TransactionCoordinator` and broker/coordinator_runtime.py.

The state machine decides everything; handlers reach it only through `call_and_wait`, which
* writes every changed transaction to `__transaction_state` (compacted, partition = hash of
  the transactional id, Kafka's record format) and answers once it, and every earlier
  write to the id's partition, is committed (readers too: DescribeTransactions and
  ListTransactions show committed state);
* hands a transaction that entered PrepareCommit/PrepareAbort to the marker channel once
  that state is committed: every marker, to a partition led here or elsewhere, takes the
  same path (broker/txn_marker_sender.py, then broker/txn_marker_writer.py on the leader)
  and counts only once replicated; when the last is in, the transaction completes, once,
  in `markers_acknowledged` (CompleteCommit / CompleteAbort written).
The runtime loads a `__transaction_state` partition this broker becomes leader of
(COORDINATOR_LOAD_IN_PROGRESS meanwhile; transactions left in PrepareCommit/PrepareAbort
then get their markers) and unloads one it stops leading (NOT_COORDINATOR). The
coordinator epoch of the markers is the partition's leader epoch. A timer task aborts
transactions older than their timeout and expires idle transactional ids.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions
from kafkalite.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from kafkalite.broker.group_coordinator_service import coordinator_append_error
from kafkalite.broker.partition_loader import Batch
from kafkalite.broker.txn_marker_sender import MarkerChannel
from kafkalite.broker.txn_verification import TxnVerifier
from kafkalite.coordinator import group_partition
from kafkalite.security.inter_broker import inter_broker_security
from kafkalite.storage.records import Record, decode_records
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
    """The transaction coordinator as an adapter onto the coordinator runtime: it turns
    changed transactions into `__transaction_state` records and replays them; the runtime
    loads, writes and answers once committed."""

    config: BrokerConfig
    replica_manager: ReplicaManager
    groups: GroupCoordinatorService
    metadata: ClusterMetadata
    coordinator: TransactionCoordinator = field(init=False)
    runtime: CoordinatorRuntime = field(init=False)
    markers: MarkerChannel = field(init=False)
    verifier: TxnVerifier = field(init=False)

    def __post_init__(self) -> None:
        self.runtime = CoordinatorRuntime(self._topic_spec, self.replica_manager, self)
        self.markers = MarkerChannel(self)
        self.verifier = TxnVerifier(
            self.config.broker_id,
            self.coordinator_for,
            self.markers.endpoint_of,
            self.config.int("request.timeout.ms"),
            inter_broker_security(self.config),
        )
        self.coordinator = TransactionCoordinator(
            self.metadata.allocate_producer_id,
            max_timeout_ms=self.config.int("transaction.max.timeout.ms"),
            id_expiration_ms=self.config.int("transactional.id.expiration.ms"),
        )

    def _topic_spec(self) -> InternalTopic:
        return InternalTopic(
            TXN_STATE_TOPIC,
            self.config.int("transaction.state.log.num.partitions"),
            self.config.int("transaction.state.log.replication.factor"),
            txn_state_topic_configs(self.config),
        )

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self.runtime.partitions

    def now_ms(self) -> int:
        return self.replica_manager.clock_ms()

    # -- the runtime's shard: loading and unloading ---------------------------------------

    def load(self) -> None:
        """At startup: load the `__transaction_state` partitions this broker leads (each
        finishes what a restart interrupted), then follow leadership changes."""
        loaded = self.runtime.start()
        if loaded is not None:
            log.info("loaded %d record(s) from %s", loaded, TXN_STATE_TOPIC)

    def replay(self, index: int, batches: list[Batch]) -> int:
        """Replay a loaded partition, then finish its transactions left in PrepareCommit /
        PrepareAbort (Kafka's loader completes them on load)."""
        loaded = sum(self._replay(r.key, r.value, r.offset) for r in _records(batches))
        self.coordinator.resume_after_load(lambda tid: self.partition_for(tid) == index)
        self._after_call()
        return loaded

    def unload(self, index: int) -> None:
        count = self.runtime.partition_count()
        dropped = self.coordinator.unload(lambda tid: txn_partition(tid, count) == index)
        log.info("unloaded %d transactional id(s) of %s-%d", len(dropped), TXN_STATE_TOPIC, index)

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
        return self.runtime.ensure_topic()

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
        if leader != self.config.broker_id:
            return ErrorCode.not_coordinator
        return self.runtime.check(transactional_id)

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def coordinator_epoch_for(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's markers: the leader epoch of its partition, so
        partition leaders fence a deposed coordinator's late markers (-1: not served here)."""
        return self.runtime.epoch(self.partition_for(transactional_id))

    # -- the entry points ------------------------------------------------------------------

    def call(self, operation: Callable[[TransactionCoordinator, int], T]) -> tuple[T, ErrorCode]:
        """Run `operation(coordinator, now_ms)`, then write what it changed (markers follow
        once a PrepareCommit/PrepareAbort is committed). For the broker's own work (timers);
        a request's answer waits: `call_and_wait`. Returns the result and NONE, or the
        error of a write that failed outright."""
        result = operation(self.coordinator, self.now_ms())
        error, _ = self._after_call()
        return result, error

    async def call_and_wait(
        self,
        operation: Callable[[TransactionCoordinator, int], T],
        transactional_ids: Iterable[str] | None = None,
    ) -> tuple[T, ErrorCode]:
        """`call`, returned once what it wrote, and every earlier write to the partitions of
        `transactional_ids` (None: of every partition served here), is committed (Kafka
        answers InitProducerId, AddPartitionsToTxn and EndTxn so; readers see only
        committed state)."""
        result = operation(self.coordinator, self.now_ms())
        error, written = self._after_call()
        if transactional_ids is None:
            indexes = written | set(self.runtime.served())
        else:
            indexes = written | {self.partition_for(tid) for tid in transactional_ids}
        timeout_ms = self.config.int("request.timeout.ms")
        failed = await self.runtime.committed(indexes, timeout_ms)
        if error is ErrorCode.none and failed:
            error = txn_append_error(next(iter(failed.values())))
        return result, error

    def _after_call(self) -> tuple[ErrorCode, set[int]]:
        """Write the changed transactions; send the markers of those that entered
        PrepareCommit/PrepareAbort once that state is committed (not for an id this broker
        stopped serving meanwhile: its new coordinator completes it when it loads)."""
        error, written = self._persist()
        for job in self.coordinator.take_jobs():
            index = self.partition_for(job.transactional_id)
            epoch = self.runtime.epoch(index)
            if epoch >= 0:
                self.runtime.defer(index, functools.partial(self._send_markers, job, epoch))
        return error, written

    def _send_markers(self, job: MarkerJob, epoch: int, error: ErrorCode) -> None:
        if error is ErrorCode.none and self.coordinator_epoch_for(job.transactional_id) == epoch:
            self.markers.send(job, epoch)

    def markers_acknowledged(self, job: MarkerJob) -> None:
        """Every marker of a transaction is replicated: complete it, once, here."""
        self.coordinator.complete(job, self.now_ms())
        self._after_call()

    def _persist(self) -> tuple[ErrorCode, set[int]]:
        """Append the changed transactions, a batch per partition: the error of a write that
        failed outright (its partition was reverted), and the partitions written."""
        changed: list[tuple[str, TxnMetadata | None]] = [
            (meta.transactional_id, meta) for meta in self.coordinator.take_changes()
        ]
        changed += [(tid, None) for tid in self.coordinator.expired]
        self.coordinator.expired.clear()
        if not changed:
            return ErrorCode.none, set()
        if self.ensure_state_topic() is not ErrorCode.none:
            return ErrorCode.coordinator_not_available, set()
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for tid, meta in changed:
            value = None if meta is None else encode_value(meta)
            by_partition[self.partition_for(tid)].append((encode_key(tid), value))
        error, written = ErrorCode.none, set()
        for index, records in by_partition.items():
            appended = self.runtime.append(index, records, timestamp_ms=self.now_ms())
            if appended is ErrorCode.none:
                written.add(index)
            else:
                error = txn_append_error(appended)
        return error, written

    # -- timers ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loads, the marker sender, and the timers: abort timed-out transactions and
        expire idle ids on Kafka's two periods."""
        abort_every = self.config.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        expire_every = self.config.int("transaction.remove.expired.transaction.cleanup.interval.ms")
        next_expiry = self.now_ms() + expire_every
        async with trio.open_nursery() as nursery:
            await nursery.start(self.runtime.run)
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


def _records(chunk: list[Batch]) -> list[Record]:
    """The data records of a chunk of batches (control batches skipped)."""
    return [r for header, batch in chunk if not header.is_control for r in decode_records(batch)]
