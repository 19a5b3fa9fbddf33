"""The transaction coordinator's state machine (Kafka's TransactionCoordinator and
TransactionMetadata), sans-IO: every operation takes `now_ms` and returns the error to
answer. What it changed is left for the caller: `take_changes` names the transactional ids
whose state must be persisted, `take_jobs` the `MarkerJob`s (commit/abort markers to each
partition of an ending transaction) to write, after persisting, before calling `complete`.

States: Empty -> Ongoing (partitions added) -> PrepareCommit / PrepareAbort (EndTxn, a
timeout, or a fencing re-init: PrepareEpochFence) -> CompleteCommit / CompleteAbort once
the markers are written; Dead once the id expired. Epoch bumps fence older producers
(PRODUCER_FENCED); a transaction still finishing answers CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1
TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    last_update_ms: int = 0


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers to write for a transaction entering PrepareCommit/PrepareAbort."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(eq=False)
class TransactionCoordinator:
    allocate_producer_id: Callable[[], int]
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    coordinator_epoch: int = 0
    transactions: dict[str, TxnMetadata] = field(default_factory=dict)
    _changed: set[str] = field(default_factory=set)
    _jobs: list[MarkerJob] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)  # ids to tombstone

    def take_changes(self) -> list[TxnMetadata]:
        changed = [
            self.transactions[tid] for tid in sorted(self._changed) if tid in self.transactions
        ]
        self._changed.clear()
        return changed

    def take_jobs(self) -> list[MarkerJob]:
        jobs, self._jobs = self._jobs, []
        return jobs

    def load(self, transactional_id: str, meta: TxnMetadata | None) -> None:
        """Replay one `__transaction_state` record (None: a tombstone)."""
        if meta is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = meta

    def unload(self, unloaded: Callable[[str], bool]) -> list[str]:
        """Forget the transactional ids `unloaded` selects: their `__transaction_state`
        partition has another coordinator now (Kafka's removeTransactionsForTxnTopicPartition)."""
        dropped = [tid for tid in self.transactions if unloaded(tid)]
        for tid in dropped:
            del self.transactions[tid]
            self._changed.discard(tid)
        return dropped

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.transactions.get(transactional_id)

    # -- InitProducerId --------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        now_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        """Kafka's handleInitProducerId: a new id starts at epoch 0; a known one gets its
        epoch bumped (fencing the previous instance); an open transaction is aborted first
        and the caller retries (CONCURRENT_TRANSACTIONS)."""
        if not transactional_id:
            return InitResult(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            meta = TxnMetadata(
                transactional_id, self.allocate_producer_id(), NO_PRODUCER_EPOCH, timeout_ms
            )
            self.transactions[transactional_id] = meta
        if expected_producer_id != NO_PRODUCER_ID and not self._is_expected(
            meta, expected_producer_id, expected_epoch
        ):
            return InitResult(ErrorCode.producer_fenced)
        if meta.state in PREPARING:
            return InitResult(ErrorCode.concurrent_transactions)
        if meta.state is TxnState.ONGOING:
            # Fence the current producer and abort its transaction with the bumped epoch.
            self._bump_epoch(meta)
            meta.state = TxnState.PREPARE_EPOCH_FENCE
            self._prepare(meta, False, now_ms)
            return InitResult(ErrorCode.concurrent_transactions)
        self._bump_epoch(meta)
        meta.timeout_ms = timeout_ms
        meta.state = TxnState.EMPTY
        meta.partitions = set()
        meta.txn_start_ms = -1
        meta.last_update_ms = now_ms
        self._changed.add(transactional_id)
        return InitResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)

    @staticmethod
    def _is_expected(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """KIP-360: a re-init naming its current (or just-bumped) producer id and epoch."""
        if producer_id != meta.producer_id:
            return False
        return epoch in (meta.producer_epoch, meta.last_producer_epoch)

    def _bump_epoch(self, meta: TxnMetadata) -> None:
        meta.last_producer_epoch = meta.producer_epoch
        if meta.producer_epoch >= MAX_EPOCH - 1:
            meta.producer_id = self.allocate_producer_id()  # epoch exhausted: a new id
            meta.producer_epoch = 0
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
        else:
            meta.producer_epoch += 1

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> ErrorCode:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> ErrorCode:
        error = self._check_producer(transactional_id, producer_id, epoch)
        if error is not ErrorCode.none:
            return error
        meta = self.transactions[transactional_id]
        if meta.state in PREPARING:
            return ErrorCode.concurrent_transactions
        if meta.state in COMPLETED:
            meta.partitions = set()
            meta.txn_start_ms = now_ms
        added = set(partitions)
        if meta.state is TxnState.ONGOING and added <= meta.partitions:
            return ErrorCode.none  # a retry: nothing to persist
        meta.partitions.update(added)
        meta.state = TxnState.ONGOING
        meta.last_update_ms = now_ms
        self._changed.add(transactional_id)
        return ErrorCode.none

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """The v4+ verify-only form brokers use before a transactional produce."""
        error = self._check_producer(transactional_id, producer_id, epoch)
        meta = self.transactions.get(transactional_id)
        result = {}
        for tp in partitions:
            if error is not ErrorCode.none:
                result[tp] = error
            elif meta is None or meta.state is not TxnState.ONGOING or tp not in meta.partitions:
                result[tp] = ErrorCode.invalid_txn_state
            else:
                result[tp] = ErrorCode.none
        return result

    # -- EndTxn ----------------------------------------------------------------------------

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int
    ) -> ErrorCode:
        """Kafka's handleEndTransaction: a retried EndTxn of a finished transaction is
        answered as before; the other outcome is INVALID_TXN_STATE."""
        error = self._check_producer(transactional_id, producer_id, epoch)
        if error is not ErrorCode.none:
            return error
        meta = self.transactions[transactional_id]
        state = meta.state
        if state is TxnState.ONGOING:
            self._prepare(meta, commit, now_ms)
            return ErrorCode.none
        if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return ErrorCode.none
        if state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        return ErrorCode.invalid_txn_state  # Empty, the other outcome, PrepareEpochFence

    def _prepare(self, meta: TxnMetadata, commit: bool, now_ms: int) -> None:
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        meta.last_update_ms = now_ms
        self._changed.add(meta.transactional_id)
        self._jobs.append(_job(meta))

    def complete(self, job: MarkerJob, now_ms: int) -> None:
        """Every marker of `job` is written: the transaction is complete."""
        meta = self.transactions.get(job.transactional_id)
        if meta is None or meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return
        meta.state = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        meta.partitions = set()
        meta.txn_start_ms = -1
        meta.last_update_ms = now_ms
        self._changed.add(job.transactional_id)

    # -- timers --------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> int:
        """Transactions open longer than their timeout are aborted with a bumped epoch
        (Kafka's abortTimedOutTransactions), which fences their producer."""
        count = 0
        for meta in self.transactions.values():
            if meta.state is TxnState.ONGOING and now_ms - meta.txn_start_ms > meta.timeout_ms:
                self._bump_epoch(meta)
                self._prepare(meta, False, now_ms)
                count += 1
        return count

    def expire_ids(self, now_ms: int) -> list[str]:
        """transactional.id.expiration.ms: completed ids idle that long are forgotten (the
        caller writes their tombstones)."""
        expired = [
            tid
            for tid, meta in self.transactions.items()
            if meta.state in COMPLETED and now_ms - meta.last_update_ms >= self.id_expiration_ms
        ]
        for tid in expired:
            del self.transactions[tid]
        self.expired.extend(expired)
        return expired

    def resume_after_load(self, loaded: Callable[[str], bool] = lambda _tid: True) -> None:
        """Transactions a restart left in PrepareCommit/PrepareAbort: their markers are
        written (again; a marker twice is harmless) and the transaction completed. `loaded`
        selects the ids just loaded (the others' markers may be in flight already)."""
        for meta in self.transactions.values():
            if not loaded(meta.transactional_id):
                continue
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._jobs.append(_job(meta))


def _job(meta: TxnMetadata) -> MarkerJob:
    return MarkerJob(
        meta.transactional_id,
        meta.producer_id,
        meta.producer_epoch,
        meta.state is TxnState.PREPARE_COMMIT,
        frozenset(meta.partitions),
    )
