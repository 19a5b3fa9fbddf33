"""The transaction coordinator's state machine (sans-IO): epochs and fencing, the states a
transaction passes through, the errors Kafka answers, timeouts, expiry, and its records."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.txn.coordinator import MAX_EPOCH, TransactionCoordinator, TxnMetadata, TxnState
from kafkalite.txn.records import decode_key, decode_value, encode_key, encode_value

TID = "app-1"
TP = [("t", 0), ("t", 1)]


def new_coordinator(**kwargs) -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(lambda: next(ids), **kwargs)


def init(c: TransactionCoordinator, now: int = 0, **kwargs):
    return c.init_producer_id(TID, 60_000, now, **kwargs)


def test_first_init_starts_at_epoch_zero_and_reinit_bumps() -> None:
    c = new_coordinator()
    first = init(c)
    assert (first.error, first.producer_id, first.producer_epoch) == (ErrorCode.none, 1000, 0)
    second = init(c)
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    assert [m.transactional_id for m in c.take_changes()] == [TID]


def test_commit_passes_through_prepare_and_complete() -> None:
    c = new_coordinator()
    r = init(c)
    assert c.add_partitions(TID, r.producer_id, 0, TP, 10) is ErrorCode.none
    assert c.transactions[TID].state is TxnState.ONGOING
    assert c.end_txn(TID, r.producer_id, 0, True, 20) is ErrorCode.none
    assert c.transactions[TID].state is TxnState.PREPARE_COMMIT
    [job] = c.take_jobs()
    assert (job.commit, job.partitions, job.producer_epoch) == (True, frozenset(TP), 0)
    # A retry while the markers are being written.
    assert c.end_txn(TID, r.producer_id, 0, True, 21) is ErrorCode.concurrent_transactions
    assert c.add_partitions(TID, r.producer_id, 0, TP, 21) is ErrorCode.concurrent_transactions
    c.complete(job, 30)
    assert c.transactions[TID].state is TxnState.COMPLETE_COMMIT
    assert c.end_txn(TID, r.producer_id, 0, True, 40) is ErrorCode.none  # retried: same answer
    assert c.end_txn(TID, r.producer_id, 0, False, 40) is ErrorCode.invalid_txn_state


def test_errors_as_kafka_answers_them() -> None:
    c = new_coordinator(max_timeout_ms=1000)
    assert c.init_producer_id(TID, 1001, 0).error is ErrorCode.invalid_transaction_timeout
    assert c.add_partitions(TID, 1, 0, TP, 0) is ErrorCode.invalid_producer_id_mapping
    r = c.init_producer_id(TID, 1000, 0)
    assert c.end_txn(TID, r.producer_id, 0, True, 0) is ErrorCode.invalid_txn_state  # Empty
    assert c.add_partitions(TID, r.producer_id + 1, 0, TP, 0) is (
        ErrorCode.invalid_producer_id_mapping
    )
    assert c.add_partitions(TID, r.producer_id, 1, TP, 0) is ErrorCode.producer_fenced


def test_reinit_fences_the_old_producer_and_aborts_its_transaction() -> None:
    c = new_coordinator()
    r = init(c)
    c.add_partitions(TID, r.producer_id, 0, TP, 0)
    fencing = init(c, 5)
    assert fencing.error is ErrorCode.concurrent_transactions
    [job] = c.take_jobs()
    assert (job.commit, job.producer_epoch) == (False, 1)  # the abort carries the new epoch
    assert c.end_txn(TID, r.producer_id, 0, True, 6) is ErrorCode.producer_fenced
    c.complete(job, 7)
    retried = init(c, 8)
    assert (retried.error, retried.producer_epoch) == (ErrorCode.none, 2)
    assert c.add_partitions(TID, r.producer_id, 0, TP, 9) is ErrorCode.producer_fenced


def test_kip360_reinit_names_its_epoch() -> None:
    c = new_coordinator()
    r = init(c)
    wrong = init(c, expected_producer_id=r.producer_id, expected_epoch=5)
    assert wrong.error is ErrorCode.producer_fenced
    ok = init(c, expected_producer_id=r.producer_id, expected_epoch=0)
    assert (ok.error, ok.producer_epoch) == (ErrorCode.none, 1)


def test_exhausted_epoch_gets_a_new_producer_id() -> None:
    c = new_coordinator()
    init(c)
    c.transactions[TID].producer_epoch = MAX_EPOCH - 1
    r = init(c)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    c = new_coordinator()
    r = c.init_producer_id(TID, 1000, 0)
    c.add_partitions(TID, r.producer_id, 0, TP, 100)
    assert c.abort_timed_out(1100) == 0
    assert c.abort_timed_out(1101) == 1
    [job] = c.take_jobs()
    assert (job.commit, job.producer_epoch) == (False, 1)
    c.complete(job, 1102)
    assert c.add_partitions(TID, r.producer_id, 0, TP, 1103) is ErrorCode.producer_fenced


def test_idle_ids_expire_and_restart_resumes_prepared_transactions() -> None:
    c = new_coordinator(id_expiration_ms=1000)
    init(c)
    assert c.expire_ids(999) == [] and c.expire_ids(1000) == [TID]
    assert TID not in c.transactions and c.expired == [TID]
    restarted = new_coordinator()
    meta = TxnMetadata(TID, 7, 3, 1000, TxnState.PREPARE_COMMIT, partitions=set(TP))
    restarted.load(TID, meta)
    restarted.resume_after_load()
    [job] = restarted.take_jobs()
    assert (job.producer_id, job.producer_epoch, job.commit) == (7, 3, True)


def test_records_round_trip_in_kafkas_format() -> None:
    meta = TxnMetadata(TID, 42, 3, 60_000, TxnState.ONGOING, partitions=set(TP))
    meta.txn_start_ms, meta.last_update_ms = 5, 6
    key, value = encode_key(TID), encode_value(meta)
    assert key == b"\x00\x00\x00\x05app-1"
    # version 0, producer id, epoch, timeout, status 1 (Ongoing), then one topic "t": [0, 1]
    assert value[:17] == bytes.fromhex("0000000000000000002a00030000ea6001")
    decoded = decode_value(decode_key(key), value)
    assert decoded == meta


@pytest.mark.parametrize("state", list(TxnState))
def test_every_state_has_a_status_byte(state: TxnState) -> None:
    meta = TxnMetadata(TID, 1, 0, 1000, state)
    assert decode_value(TID, encode_value(meta)).state is state
