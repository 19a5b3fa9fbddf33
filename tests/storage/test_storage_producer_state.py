"""Idempotent producers: duplicates, sequence gaps, fencing, snapshots and expiration."""

from __future__ import annotations

from pathlib import Path

import pytest
from batches import make_batch

from kafkalite.storage.batch import parse_header
from kafkalite.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.producer_state import ProducerStateManager

PID = 4000
DEFAULT = LogConfig()


def open_log(path: Path, config: LogConfig = DEFAULT, **kwargs) -> UnifiedLog:
    return UnifiedLog.open(path / "t-0", config, now_ms=kwargs.pop("now_ms", 0), **kwargs)


def produce(log: UnifiedLog, seq: int, count: int = 2, epoch: int = 0, pid: int = PID, ts=1000):
    batch = make_batch(
        count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, base_timestamp=ts
    )
    return log.append_as_leader(batch, 0, now_ms=ts)


def test_duplicate_returns_original_offsets_without_appending(tmp_path) -> None:
    log = open_log(tmp_path)
    first = produce(log, 0)
    produce(log, 2)
    size = log.size_in_bytes
    again = produce(log, 0)
    assert (again.first_offset, again.last_offset, again.duplicate) == (0, 1, True)
    assert again.log_append_time_ms == -1
    assert log.size_in_bytes == size and log.log_end_offset == 4
    assert not first.duplicate
    log.close()


def test_duplicate_detection_covers_last_five_batches(tmp_path) -> None:
    log = open_log(tmp_path)
    for i in range(6):
        produce(log, 2 * i)
    assert produce(log, 2).duplicate  # batch 1 is among the last five
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)  # batch 0 fell out of the window
    log.close()


def test_out_of_order_sequence(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError) as info:
        produce(log, 5)
    assert info.value.error_code.value == 45
    assert log.log_end_offset == 2
    produce(log, 2)
    log.close()


def test_unknown_producer_accepts_any_sequence(tmp_path) -> None:
    log = open_log(tmp_path)
    assert produce(log, 1234, epoch=3).first_offset == 0
    assert produce(log, 1236, epoch=3).first_offset == 2
    log.close()


def test_fenced_epoch_and_new_epoch_must_start_at_zero(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, epoch=5)
    with pytest.raises(InvalidProducerEpochError) as info:
        produce(log, 2, epoch=4)
    assert info.value.error_code.value == 47
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 7, epoch=6)
    produce(log, 0, epoch=6)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=5)
    log.close()


def test_sequence_wraps_at_int32(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 2**31 - 2, count=1)
    produce(log, 2**31 - 1, count=1)
    produce(log, 0, count=1)
    header = parse_header(log.read(2, 1000, 3))
    assert header.base_sequence == 0
    log.close()


def test_batch_spanning_wrap_sets_last_sequence(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 2**31 - 1, count=3)  # sequences 2^31-1, 0, 1
    produce(log, 2, count=1)
    log.close()


def test_multiple_batches_in_one_append(tmp_path) -> None:
    log = open_log(tmp_path)
    records = b"".join(
        make_batch(2, producer_id=PID, producer_epoch=0, base_sequence=s) for s in (0, 2)
    )
    result = log.append_as_leader(records, 0, now_ms=0)
    assert (result.first_offset, result.last_offset) == (0, 3)
    gap = b"".join(
        make_batch(2, producer_id=PID, producer_epoch=0, base_sequence=s) for s in (4, 7)
    )
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(gap, 0, now_ms=0)
    assert log.log_end_offset == 4  # nothing of the failed append was written
    produce(log, 4)
    log.close()


def test_non_idempotent_batches_are_ignored(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(1), 0, now_ms=0)
    log.append_as_leader(make_batch(1), 0, now_ms=0)
    assert log.producer_state.producers == {}
    log.close()


@pytest.mark.parametrize("with_snapshot", [True, False])
def test_state_rebuilt_after_reopen(tmp_path, with_snapshot) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=400))
    for i in range(10):
        produce(log, 2 * i)
    log.close()
    snapshots = sorted(log.dir.glob("*.snapshot"))
    assert 1 <= len(snapshots) <= 2
    if not with_snapshot:
        for path in snapshots:
            path.unlink()
    reopened = open_log(tmp_path, LogConfig(segment_bytes=400), recovery_point=20)
    assert produce(reopened, 18).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, 30)
    assert produce(reopened, 20).first_offset == 20
    reopened.close()


def test_state_replayed_after_crash_from_older_snapshot(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=400))
    for i in range(10):
        produce(log, 2 * i)
    # crash: no close, the newest snapshot is from the last roll
    assert max(int(p.stem) for p in log.dir.glob("*.snapshot")) < 20
    reopened = open_log(tmp_path, LogConfig(segment_bytes=400), recovery_point=0)
    assert produce(reopened, 18).duplicate
    assert produce(reopened, 20).first_offset == 20
    reopened.close()


def test_corrupt_snapshot_falls_back(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    log.close()
    (snapshot,) = log.dir.glob("*.snapshot")
    snapshot.write_bytes(snapshot.read_bytes()[:-3] + b"xyz")
    reopened = open_log(tmp_path, recovery_point=2)
    assert produce(reopened, 0).duplicate
    reopened.close()


def test_truncation_rebuilds_producer_state(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    produce(log, 2)
    log.truncate_to(2)
    assert produce(log, 2).first_offset == 2  # seq 2 is no longer a duplicate
    log.close()


def test_remove_expired(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(producer_id_expiration_ms=1000))
    produce(log, 0, ts=5000)
    produce(log, 0, pid=PID + 1, ts=5500)
    assert log.remove_expired_producers(6000) == 1
    assert set(log.producer_state.producers) == {PID + 1}
    produce(log, 77, ts=7000)  # expired producer is unknown again: any sequence
    log.close()
    state = ProducerStateManager(log.dir, producer_id_expiration_ms=1000)
    assert state.load_latest_snapshot(6, now_ms=7000) == 6
    assert set(state.producers) == {PID}  # a snapshot's expired producers are not loaded


def test_snapshot_round_trip(tmp_path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, epoch=2)
    produce(log, 0, pid=PID + 1, epoch=0)
    log.producer_state.take_snapshot()
    state = ProducerStateManager(log.dir, producer_id_expiration_ms=10**12)
    assert state.load_latest_snapshot(4, now_ms=0) == 4
    assert state.producers == log.producer_state.producers
    log.close()


def test_duplicate_with_log_append_time_returns_original_append_time(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    batch = make_batch(1, producer_id=PID, producer_epoch=0, base_sequence=0, base_timestamp=5)
    first = log.append_as_leader(batch, 0, now_ms=1000)
    again = log.append_as_leader(batch, 0, now_ms=2000)
    assert (first.log_append_time_ms, again.log_append_time_ms) == (1000, 1000)
    assert again.duplicate and again.first_offset == 0
    assert log.producer_state.last_entry(PID).last_timestamp == 1000
    log.close()


@pytest.mark.parametrize("replayed", [False, True], ids=["appended", "replayed"])
def test_an_open_transaction_starts_at_its_first_batch(tmp_path, replayed) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(1), 0, now_ms=0)  # offset 0: no transaction
    for seq in (0, 2):  # offsets 1-2, then 3-4 in the same transaction
        batch = make_batch(
            2, producer_id=PID, producer_epoch=0, base_sequence=seq, transactional=True
        )
        log.append_as_leader(batch, 0, now_ms=0)
    if replayed:
        log.close()
        for snapshot in log.dir.glob("*.snapshot"):
            snapshot.unlink()  # rebuilt from the batches in the log
        log = open_log(tmp_path, recovery_point=0)
    assert log.producer_state.last_entry(PID).current_txn_first_offset == 1
    assert log.first_unstable_offset == 1
    log.close()
