"""Compaction of transactional data, as Kafka's LogCleaner: records of aborted transactions
are removed (and never hide a committed value of their key), an abort marker and its
`.txnindex` entry stay while records of its transaction were still seen, and markers go
once nothing of their transaction is left and their segment is older than
delete.retention.ms. The same in the cleaner process as on a thread."""

from __future__ import annotations

from pathlib import Path

import pytest
from batches import Record, make_batch
from test_cleaner_process import clean_now, partition_of

from kafkalite.broker.broker import Broker
from kafkalite.config import build_config
from kafkalite.storage.batch import iter_batches
from kafkalite.storage.control_batch import EndTxnMarker, decode_marker
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.records import decode_records
from kafkalite.storage.txn_index import AbortedTxn, read_entries

DAY = 86_400_000
TS = 1_000
CONFIG = LogConfig(segment_bytes=100_000, cleanup_policy="compact", delete_retention_ms=DAY)
COMMITTER, ABORTER = 1, 2

Item = tuple[int, object, object]  # (offset, key or "COMMIT"/"ABORT", value or producer id)


def open_log(path: Path) -> UnifiedLog:
    return UnifiedLog.open(path / "topic-0", CONFIG, now_ms=TS)


def txn_put(log: UnifiedLog, pid: int, seq: int, *pairs: tuple[bytes, bytes]) -> None:
    records = [Record(key=k, value=v) for k, v in pairs]
    batch = make_batch(
        records,
        base_timestamp=TS,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )
    log.append_as_leader(batch, 0, now_ms=TS)


def put(log: UnifiedLog, *pairs: tuple[bytes, bytes]) -> None:
    batch = make_batch([Record(key=k, value=v) for k, v in pairs], base_timestamp=TS)
    log.append_as_leader(batch, 0, now_ms=TS)


def end_txn(log: UnifiedLog, pid: int, commit: bool) -> None:
    log.append_marker(pid, 0, EndTxnMarker(commit, 0), 0, TS)


def items(data: bytes) -> list[Item]:
    """Data records as (offset, key, value); markers as (offset, COMMIT/ABORT, producer)."""
    out: list[Item] = []
    for position, header in iter_batches(data):
        batch = data[position : position + header.size]
        if header.is_control:
            marker = decode_marker(batch)
            assert marker is not None
            kind = "COMMIT" if marker.commit else "ABORT"
            out.append((header.base_offset, kind, header.producer_id))
        else:
            out += [(r.offset, r.key, r.value) for r in decode_records(batch)]
    return out


def log_items(log: UnifiedLog) -> list[Item]:
    """Every batch from the log start to the log end (a read stops at a segment's end)."""
    out: list[Item] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1_000_000, log.log_end_offset)
        if not data:
            break
        out += [item for item in items(data) if item[0] >= offset]
        offset = max(header.last_offset for _, header in iter_batches(data)) + 1
    return out


def headers(log: UnifiedLog) -> list[tuple[int, int, int]]:
    """(base offset, record count, producer id) of every batch, empty ones too."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1_000_000, log.log_end_offset)
        if not data:
            break
        found = [h for _, h in iter_batches(data) if h.last_offset >= offset]
        out += [(h.base_offset, h.records_count, h.producer_id) for h in found]
        offset = found[-1].last_offset + 1
    return out


def index_on_disk(log: UnifiedLog) -> list[AbortedTxn]:
    return [e for path in sorted(log.dir.glob("*.txnindex")) for e in read_entries(path)]


def write_transactions(log: UnifiedLog) -> None:
    txn_put(log, COMMITTER, 0, (b"k1", b"a1"), (b"k2", b"a2"))  # 0-1
    end_txn(log, COMMITTER, True)  # 2
    txn_put(log, ABORTER, 0, (b"k1", b"b1"), (b"k3", b"b3"))  # 3-4: newer k1, aborted
    end_txn(log, ABORTER, False)  # 5
    put(log, (b"k4", b"v4"))  # 6
    log.roll(now_ms=TS)
    put(log, (b"z", b"1"))  # 7, in the active segment


ABORTED = AbortedTxn(ABORTER, 3, 5, 6)


def test_aborted_records_go_then_the_markers_after_delete_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_transactions(log)
    assert log.aborted_txns == [ABORTED]

    first = log.compact(now_ms=TS + 1)
    assert first is not None
    # The aborted k1 did not hide the committed one; both markers stay: this pass still
    # saw records of their transactions (the aborted ones were removed by it).
    assert log_items(log) == [
        (0, b"k1", b"a1"),
        (1, b"k2", b"a2"),
        (2, "COMMIT", COMMITTER),
        (5, "ABORT", ABORTER),
        (6, b"k4", b"v4"),
        (7, b"z", b"1"),
    ]
    assert log.aborted_txns == index_on_disk(log) == [ABORTED]

    # The aborted batch stays as an empty header: it holds its producer's last sequence.
    assert headers(log)[:3] == [(0, 2, COMMITTER), (2, 1, COMMITTER), (3, 0, ABORTER)]

    # The committed keys are overwritten and the aborting producer commits a transaction
    # (its empty header is no longer its last batch); within delete.retention.ms.
    put(log, (b"k1", b"c1"), (b"k2", b"c2"))  # 8-9
    txn_put(log, ABORTER, 2, (b"k5", b"b5"))  # 10
    end_txn(log, ABORTER, True)  # 11
    log.roll(now_ms=TS)
    put(log, (b"z", b"2"))  # 12
    second = log.compact(TS + DAY - 1, first.first_dirty_offset)
    assert second is not None
    assert log_items(log) == [
        (2, "COMMIT", COMMITTER),
        (5, "ABORT", ABORTER),
        (6, b"k4", b"v4"),
        (8, b"k1", b"c1"),
        (9, b"k2", b"c2"),
        (10, b"k5", b"b5"),
        (11, "COMMIT", ABORTER),
        (12, b"z", b"2"),
    ]
    # The empty aborted header went in this pass, which saw it: marker and entry stay once
    # more. The committer's emptied batch stays as a header (its last sequence).
    assert log.aborted_txns == index_on_disk(log) == [ABORTED]
    assert headers(log)[:3] == [(0, 0, COMMITTER), (2, 1, COMMITTER), (5, 1, ABORTER)]

    # Past delete.retention.ms: the abort marker, with nothing of its transaction left, goes;
    # the commit markers stay while batches of their transactions do.
    log.roll(now_ms=TS)
    put(log, (b"z", b"3"))  # 13
    assert log.compact(TS + DAY + 1, second.first_dirty_offset) is not None
    assert log_items(log) == [
        (2, "COMMIT", COMMITTER),
        (6, b"k4", b"v4"),
        (8, b"k1", b"c1"),
        (9, b"k2", b"c2"),
        (10, b"k5", b"b5"),
        (11, "COMMIT", ABORTER),
        (13, b"z", b"3"),
    ]
    assert log.aborted_txns == index_on_disk(log) == []
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.aborted_txns == []
    assert log_items(reopened)[-1] == (13, b"z", b"3")
    reopened.close()


def test_an_abort_marker_past_retention_stays_while_its_records_are_removed(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    write_transactions(log)
    first = log.compact(now_ms=TS + DAY + 1)  # already past delete.retention.ms
    assert first is not None
    # The abort marker stays with its index entry for this pass (it removed the records);
    # the commit marker stays while its records do.
    assert [item[:2] for item in log_items(log)] == [
        (0, b"k1"),
        (1, b"k2"),
        (2, "COMMIT"),
        (5, "ABORT"),
        (6, b"k4"),
        (7, b"z"),
    ]
    assert log.aborted_txns == index_on_disk(log) == [ABORTED]
    log.close()
    reopened = open_log(tmp_path)  # the cleaned index is what a restart loads
    assert reopened.aborted_txns == [ABORTED]
    reopened.close()


# ---- in the broker: the cleaner process and the thread cleaner ------------------------------


def transactional_broker(log_dir: Path) -> Broker:
    """A compacted topic `c` with a committed and an aborted transaction, rolled."""
    broker = Broker.open(build_config({"log.dirs": str(log_dir)}))
    manager = broker.replica_manager
    assert broker.admin_manager.create_topic("c", 1, 1, {"cleanup.policy": "compact"})[0].ok
    tp = ("c", 0)

    def append(batch: bytes) -> None:
        results, _ = manager.append_records({tp: batch}, 1)
        assert results[tp].error == 0, results

    for pid, commit, value in ((COMMITTER, True, b"a"), (ABORTER, False, b"b")):
        append(
            make_batch(
                [Record(key=b"k%d" % i, value=value) for i in range(3)],
                base_timestamp=TS,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                transactional=True,
            )
        )
        assert manager.append_txn_marker(tp, pid, 0, EndTxnMarker(commit, 0)) == 0
    partition_of(broker).log.roll(now_ms=TS)
    append(make_batch([Record(key=b"z", value=b"1")], base_timestamp=TS))
    return broker


@pytest.mark.parametrize("in_process", [True, False])
def test_the_broker_cleaner_removes_aborted_records(tmp_path: Path, in_process: bool) -> None:
    broker = transactional_broker(tmp_path)
    try:
        assert clean_now(broker, in_process=in_process) is not None
        log = partition_of(broker).log
        assert log_items(log) == [
            (0, b"k0", b"a"),
            (1, b"k1", b"a"),
            (2, b"k2", b"a"),
            (3, "COMMIT", COMMITTER),
            (7, "ABORT", ABORTER),
            (8, b"z", b"1"),
        ]
        assert log.aborted_txns == index_on_disk(log) == [AbortedTxn(ABORTER, 4, 7, 8)]
    finally:
        broker.shutdown()
