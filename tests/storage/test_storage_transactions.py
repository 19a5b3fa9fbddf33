"""The log side of transactions: markers, open transactions, the aborted-transaction index
(`.txnindex`, Kafka's 34-byte entries) and its recovery."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from batches import make_batch

from kafkalite.storage.batch import iter_batches
from kafkalite.storage.control_batch import EndTxnMarker, decode_marker
from kafkalite.storage.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.txn_index import AbortedTxn, txn_index_path

PID = 7000


def open_log(path: Path) -> UnifiedLog:
    return UnifiedLog.open(path / "t-0", LogConfig(), now_ms=1000)


def txn_produce(log: UnifiedLog, seq: int, count: int = 2, pid: int = PID, epoch: int = 0):
    batch = make_batch(
        count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        base_timestamp=1000,
        transactional=True,
    )
    return log.append_as_leader(batch, 0, now_ms=1000)


def test_commit_marker_closes_the_transaction(tmp_path) -> None:
    log = open_log(tmp_path)
    txn_produce(log, 0)
    assert log.first_unstable_offset == 0
    offset = log.append_marker(PID, 0, EndTxnMarker(True, 3), 0, 1000)
    assert offset == 2 and log.first_unstable_offset is None and log.aborted_txns == []
    data = log.read(2, 10_000, log.log_end_offset)
    [(pos, header)] = list(iter_batches(data))
    assert header.is_control and header.is_transactional and header.producer_id == PID
    assert decode_marker(data[pos : pos + header.size]) == EndTxnMarker(True, 3)
    log.close()


def test_abort_is_indexed_in_kafkas_format_and_recovered(tmp_path) -> None:
    log = open_log(tmp_path)
    txn_produce(log, 0, pid=PID + 1)  # another producer's open transaction, offsets 0-1
    txn_produce(log, 0)  # 2-3
    log.append_marker(PID, 0, EndTxnMarker(False, 0), 0, 1000)  # 4
    assert log.aborted_txns == [AbortedTxn(PID, 2, 4, 0)]
    raw = txn_index_path(log.dir, 0).read_bytes()
    assert raw == struct.pack(">hqqqq", 0, PID, 2, 4, 0)
    assert log.collect_aborted(0, 5) == [AbortedTxn(PID, 2, 4, 0)]
    assert log.collect_aborted(5, 6) == [] and log.collect_aborted(0, 2) == []
    assert log.first_unstable_offset == 0
    log.close()
    # Recovery without the index file and without a snapshot: rebuilt from the markers.
    txn_index_path(log.dir, 0).unlink()
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()
    reopened = open_log(tmp_path)
    assert reopened.aborted_txns == [AbortedTxn(PID, 2, 4, 0)]
    assert reopened.first_unstable_offset == 0
    assert txn_index_path(log.dir, 0).read_bytes() == raw
    reopened.close()


def test_truncation_drops_index_entries_past_the_log_end(tmp_path) -> None:
    log = open_log(tmp_path)
    txn_produce(log, 0)
    log.append_marker(PID, 0, EndTxnMarker(False, 0), 0, 1000)
    log.truncate_to(2)
    assert log.aborted_txns == [] and not txn_index_path(log.dir, 0).exists()
    assert log.first_unstable_offset == 0
    log.close()


def test_markers_fence_older_epochs(tmp_path) -> None:
    log = open_log(tmp_path)
    txn_produce(log, 0, epoch=2)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(PID, 1, EndTxnMarker(True, 0), 0, 1000)
    log.append_marker(PID, 2, EndTxnMarker(True, 5), 0, 1000)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(PID, 2, EndTxnMarker(True, 4), 0, 1000)
    log.close()
