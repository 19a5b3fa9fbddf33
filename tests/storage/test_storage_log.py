"""UnifiedLog: append/read, rolling, retention, LogAppendTime, reopen and recovery."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import pytest
from batches import NONE, ZSTD, Record, make_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.storage import leader_epoch
from kafkalite.storage.batch import compute_crc, iter_batches, parse_header
from kafkalite.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordError,
    RecordListTooLargeError,
    RecordTooLargeError,
    UnsupportedMessageFormatError,
)
from kafkalite.storage.log import LogConfig, UnifiedLog

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=200)


def open_log(path: Path, config: LogConfig = SMALL, now_ms: int = 0, **kwargs) -> UnifiedLog:
    return UnifiedLog.open(path / "topic-0", config, now_ms=now_ms, **kwargs)


def fill(log: UnifiedLog, batches: int, records: int = 3, value_size: int = 20) -> list:
    return [
        log.append_as_leader(make_batch(records, value_size=value_size), 0, now_ms=i)
        for i in range(batches)
    ]


def batch_ranges(data: bytes) -> list[tuple[int, int]]:
    ranges = [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]
    assert sum(h.size for _, h in iter_batches(data)) == len(data)  # whole batches only
    return ranges


def read_all(log: UnifiedLog) -> list[tuple[int, int]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10_000, log.log_end_offset)
        ranges = batch_ranges(data)
        out += ranges
        offset = ranges[-1][1] + 1
    return out


def test_append_assigns_offsets_and_reads_back(tmp_path) -> None:
    log = open_log(tmp_path)
    results = fill(log, 40)
    assert [r.first_offset for r in results] == list(range(0, 120, 3))
    assert results[-1].last_offset == 119
    assert log.log_end_offset == 120
    assert len(log.segments) > 3
    assert read_all(log) == [(i, i + 2) for i in range(0, 120, 3)]
    for segment in log.segments[:-1]:
        assert segment.size <= SMALL.segment_bytes
    log.close()


def test_append_patches_base_offset_and_leader_epoch(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(2), leader_epoch=7, now_ms=0)
    header = parse_header(log.read(0, 1000, 10))
    assert (header.base_offset, header.partition_leader_epoch) == (0, 7)
    assert log.leader_epoch_cache.latest_epoch == 7
    log.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 150)), min_size=1, max_size=30),
    data=st.data(),
)
def test_read_returns_whole_batches_covering_offset(tmp_path_factory, sizes, data) -> None:
    log = open_log(tmp_path_factory.mktemp("log"))
    for count, value_size in sizes:
        log.append_as_leader(make_batch(count, value_size=value_size), 0, now_ms=0)
    offset = data.draw(st.integers(0, log.log_end_offset))
    max_bytes = data.draw(st.integers(0, 2000))
    max_offset = data.draw(st.integers(0, log.log_end_offset))
    result = log.read(offset, max_bytes, max_offset, min_one_batch=True)
    ranges = batch_ranges(result)
    if offset >= max_offset or offset == log.log_end_offset:
        assert result == b""
    else:
        assert ranges and ranges[0][0] <= offset <= ranges[0][1]
        assert all(last < max_offset for _, last in ranges) or ranges[-1][0] < max_offset
        assert all(base < max_offset for base, _ in ranges)
        assert len(result) <= max_bytes or len(ranges) == 1
        for (_, last), (base, _) in zip(ranges, ranges[1:], strict=False):
            assert base == last + 1
    log.close()


def test_read_min_one_batch(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig())
    log.append_as_leader(make_batch(1, value_size=500), 0, now_ms=0)
    log.append_as_leader(make_batch(1, value_size=10), 0, now_ms=0)
    assert batch_ranges(log.read(0, 100, 2, min_one_batch=True)) == [(0, 0)]
    assert log.read(0, 100, 2, min_one_batch=False) == b""
    assert batch_ranges(log.read(0, 10_000, 2)) == [(0, 0), (1, 1)]
    assert batch_ranges(log.read(0, 10_000, 1)) == [(0, 0)]  # high watermark cut
    log.close()


def test_read_large_first_batch_spanning_past_first_pread(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig())
    log.append_as_leader(make_batch(1, value_size=300_000), 0, now_ms=0)
    data = log.read(0, 10, 1, min_one_batch=True)
    assert len(data) > 300_000 and batch_ranges(data) == [(0, 0)]
    log.close()


def test_read_at_log_end_and_out_of_range(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    assert log.read(6, 1000, 6) == b""
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(7, 1000, 7)
    assert info.value.error_code.value == 1
    log.delete_records_before(3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 1000, 6)
    log.close()


def test_read_continues_into_next_segment(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 30)
    boundary = log.segments[1].base_offset
    data = log.read(boundary, 100_000, log.log_end_offset)
    assert batch_ranges(data)[0][0] == boundary
    log.close()


def test_roll_by_size(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=500))
    batch = make_batch(1, value_size=150)
    for i in range(6):
        log.append_as_leader(batch, 0, now_ms=i)
    full = (500 // len(batch)) * len(batch)
    assert [s.size for s in log.segments[:-1]] == [full] * (len(log.segments) - 1)
    assert log.recovery_point == log.segments[-1].base_offset  # roll flushed the old segment
    log.close()


def test_roll_by_time_uses_first_batch_timestamp(tmp_path) -> None:
    config = LogConfig(segment_ms=1000)
    log = open_log(tmp_path, config)
    log.append_as_leader(make_batch(1, base_timestamp=10_000), 0, now_ms=0)
    log.append_as_leader(make_batch(1, base_timestamp=10_900), 0, now_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, base_timestamp=11_001), 0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_by_time_without_timestamps_uses_creation_time(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1000), now_ms=5000)
    log.append_as_leader(make_batch(1, base_timestamp=-1), 0, now_ms=5000)
    log.append_as_leader(make_batch(1, base_timestamp=-1), 0, now_ms=6000)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, base_timestamp=-1), 0, now_ms=6001)
    assert len(log.segments) == 2
    log.close()


def test_roll_when_index_full(tmp_path) -> None:
    config = LogConfig(index_interval_bytes=1, segment_index_bytes=16)
    log = open_log(tmp_path, config)
    for i in range(6):
        log.append_as_leader(make_batch(1), 0, now_ms=i)
    assert len(log.segments) > 1
    log.close()


def test_explicit_roll_on_empty_segment_is_noop(tmp_path) -> None:
    log = open_log(tmp_path)
    log.roll(0)
    assert len(log.segments) == 1
    fill(log, 1)
    log.roll(0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()


def test_rejects_invalid_batches_atomically(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(max_message_bytes=500, segment_bytes=2000))
    good = make_batch(1)
    corrupt = bytearray(make_batch(1))
    corrupt[-1] ^= 0xFF
    old_magic = bytearray(make_batch(1))
    old_magic[16] = 1
    cases = [
        (good + bytes(corrupt), CorruptRecordError, 2),
        (make_batch(1, value_size=600), RecordTooLargeError, 10),
        (bytes(old_magic), UnsupportedMessageFormatError, 87),
        (good[:-3], CorruptRecordError, 2),
        (make_batch(1, control=True), InvalidRecordError, 87),
        (b"", InvalidRecordError, 87),
        (make_batch(1, producer_id=5, producer_epoch=0, base_sequence=-1), InvalidRecordError, 87),
        (make_batch(1, value_size=400) * 6, RecordListTooLargeError, 18),
    ]
    for records, error, code in cases:
        with pytest.raises(error) as info:
            log.append_as_leader(records, 0, now_ms=0)
        assert info.value.error_code.value == code
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_log_append_time_rewrites_max_timestamp_with_valid_crc(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(make_batch(3, base_timestamp=5), 0, now_ms=123_456)
    assert result.log_append_time_ms == 123_456
    data = log.read(0, 10_000, 3)
    header = parse_header(data)
    assert header.max_timestamp == 123_456 and header.attributes & 0x08
    assert compute_crc(data) == header.crc
    assert log.fetch_offset_by_timestamp(123_456) == (0, 123_456, 0)
    assert log.fetch_offset_by_timestamp(123_457) is None
    log.close()


def test_create_time_result_has_no_append_time(tmp_path) -> None:
    log = open_log(tmp_path)
    assert log.append_as_leader(make_batch(1), 0, now_ms=9).log_append_time_ms == -1
    log.close()


def test_reopen_after_close_keeps_everything(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    expected = read_all(log)
    log.close()
    reopened = open_log(tmp_path, recovery_point=log.recovery_point)
    assert reopened.log_end_offset == 120
    assert read_all(reopened) == expected
    assert reopened.leader_epoch_cache.latest_epoch == 0
    fill(reopened, 1)
    assert reopened.log_end_offset == 123
    reopened.close()


def test_delete_records_before(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    target = log.segments[2].base_offset + 1
    assert log.delete_records_before(target) == target
    assert log.segments[0].base_offset == target - 1
    assert log.log_start_offset == target
    assert batch_ranges(log.read(target, 10_000, 120))[0][0] <= target
    assert log.delete_records_before(0) == target  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(121)
    log.close()
    reopened = open_log(tmp_path, log_start_offset=target)
    assert reopened.log_start_offset == target
    reopened.close()


def test_retention_by_time(tmp_path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=10_000)
    log = open_log(tmp_path, config)
    for i in range(10):
        log.append_as_leader(make_batch(1, value_size=100, base_timestamp=i * 1000), 0, now_ms=0)
    segment_count = len(log.segments)
    maxes = [s.max_timestamp for s in log.segments]
    deleted = log.apply_retention(now_ms=15_500)
    assert deleted == sum(1 for m in maxes if 15_500 - m > 10_000)
    assert len(log.segments) == segment_count - deleted
    assert all(15_500 - s.max_timestamp <= 10_000 for s in log.segments)
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_retention_by_time_rolls_and_deletes_expired_active_segment(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(retention_ms=1000))
    fill(log, 3)
    assert log.apply_retention(now_ms=10_000) == 1
    assert log.log_start_offset == log.log_end_offset == 9
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.read(9, 1000, 9) == b""
    assert log.apply_retention(now_ms=20_000) == 0
    log.close()


def test_retention_respects_high_watermark(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(retention_ms=1000, segment_bytes=300))
    for _ in range(6):
        log.append_as_leader(make_batch(1, value_size=100), 0, now_ms=0)
    hw = log.segments[1].base_offset
    assert log.apply_retention(now_ms=10_000, high_watermark=hw) == 1
    assert log.log_start_offset <= hw
    log.close()


def test_retention_never_applies_with_minus_one(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(retention_ms=-1, retention_bytes=-1, segment_bytes=300))
    for _ in range(6):
        log.append_as_leader(make_batch(1, value_size=100), 0, now_ms=0)
    assert log.apply_retention(now_ms=10**12) == 0
    log.close()


def test_retention_by_size(tmp_path) -> None:
    batch = make_batch(1, value_size=100)
    size = len(batch)
    config = LogConfig(segment_bytes=2 * size, retention_bytes=5 * size, retention_ms=-1)
    log = open_log(tmp_path, config)
    for _ in range(9):
        log.append_as_leader(batch, 0, now_ms=0)
    assert log.size_in_bytes == 9 * len(batch)
    deleted = log.apply_retention(now_ms=0)
    assert deleted == 2  # 4 batches' worth over, never more than allowed
    assert log.size_in_bytes == 5 * len(batch)
    assert log.log_start_offset == 4
    log.close()


def test_update_config(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig())
    fill(log, 2)
    log.update_config(LogConfig(retention_ms=0))
    log.apply_retention(now_ms=10**9)
    assert log.log_start_offset == 6
    log.close()


def test_flush_policy_by_messages_and_time(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(flush_messages=5, flush_ms=1000))
    log.append_as_leader(make_batch(3), 0, now_ms=0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(3), 0, now_ms=0)
    assert log.recovery_point == 6
    log.append_as_leader(make_batch(1), 0, now_ms=0)
    log.maybe_flush(500)
    assert log.recovery_point == 6
    log.maybe_flush(1000)
    assert log.recovery_point == 7
    log.close()


def test_truncate_to(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    cut = log.segments[2].base_offset + 3
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    assert read_all(log)[-1][1] == cut - 1
    fill(log, 1)
    assert log.log_end_offset == cut + 3
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_delete_removes_directory(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    log.delete()
    assert not (tmp_path / "topic-0").exists()


# ---- recovery -------------------------------------------------------------------------------


def active_log_path(log: UnifiedLog) -> Path:
    return log.dir / f"{log.active_segment.base_offset:020d}.log"


@pytest.mark.parametrize("clean", [True, False])
def test_garbage_after_active_segment_is_truncated(tmp_path, clean, caplog) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    recovery_point = log.recovery_point
    if clean:
        log.close()
        recovery_point = log.recovery_point
    path = active_log_path(log)
    with path.open("ab") as f:
        f.write(os.urandom(100))
    if not clean:
        log.segments.clear()  # simulate kill -9: fds leak, nothing flushed or snapshotted
    with caplog.at_level(logging.WARNING, logger="kafkalite.storage"):
        reopened = open_log(tmp_path, recovery_point=recovery_point)
    assert reopened.log_end_offset == 120
    assert read_all(reopened)[-1] == (117, 119)
    assert "truncated 100 invalid bytes" in caplog.text
    reopened.close()


def test_torn_partial_batch_is_truncated(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig())
    fill(log, 5)
    path = active_log_path(log)
    log.append_as_leader(make_batch(3, value_size=200), 0, now_ms=0)
    size = path.stat().st_size
    os.truncate(path, size - 50)
    log.segments.clear()
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 15
    assert path.stat().st_size < size - 50
    fill(reopened, 1)
    assert reopened.log_end_offset == 18
    reopened.close()


def test_corruption_in_middle_segment_drops_later_segments(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    segment = log.segments[2]
    path = log.dir / f"{segment.base_offset:020d}.log"
    log.close()
    with path.open("r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 8)
    reopened = open_log(tmp_path, recovery_point=0)
    assert len(reopened.segments) == 3
    assert reopened.log_end_offset < segment.next_offset
    assert read_all(reopened)[-1][1] == reopened.log_end_offset - 1
    reopened.close()


@pytest.mark.parametrize("damage", ["delete", "garbage"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_damaged_index_is_rebuilt(tmp_path, damage, suffix) -> None:
    config = LogConfig(segment_bytes=5000, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    fill(log, 60)
    first = log.segments[0]
    entries = (len(first.offset_index), len(first.time_index))
    assert entries[0] > 3
    log.close()
    path = log.dir / f"{0:020d}{suffix}"
    if damage == "delete":
        path.unlink()
    else:
        path.write_bytes(b"\x01" * 19)
    reopened = open_log(tmp_path, config, recovery_point=log.recovery_point)
    first = reopened.segments[0]
    assert (len(first.offset_index), len(first.time_index)) == entries
    assert read_all(reopened) == [(i, i + 2) for i in range(0, 180, 3)]
    reopened.close()


def test_index_entries_pointing_past_end_are_rebuilt(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=100))
    fill(log, 20)
    log.close()
    index = log.dir / f"{0:020d}.index"
    index.write_bytes(index.read_bytes() + (10**6).to_bytes(4, "big") + (10**7).to_bytes(4, "big"))
    reopened = open_log(tmp_path, recovery_point=log.recovery_point)
    assert read_all(reopened) == [(i, i + 2) for i in range(0, 60, 3)]
    reopened.close()


def test_leftover_files_are_removed(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 1)
    log.close()
    (log.dir / "leader-epoch-checkpoint.tmp").write_text("x")
    (log.dir / f"{999:020d}.index").write_bytes(b"")
    reopened = open_log(tmp_path, recovery_point=3)
    assert not (log.dir / "leader-epoch-checkpoint.tmp").exists()
    assert not (log.dir / f"{999:020d}.index").exists()
    reopened.close()


def test_timestamps_records(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig())
    log.append_as_leader(make_batch([Record(timestamp=t) for t in (5, 30, 10)]), 0, now_ms=0)
    assert log.max_timestamp_entry() == (1, 30, 0)
    log.close()


def index_state(log: UnifiedLog) -> list:
    return [
        (
            list(s.offset_index._offsets),
            list(s.offset_index._positions),
            list(s.time_index._timestamps),
            list(s.time_index._offsets),
            s.max_timestamp_and_offset,
            s.size,
            s.next_offset,
        )
        for s in log.segments
    ]


@pytest.mark.parametrize("close", [True, False])
def test_resumed_recovery_matches_full_recovery(tmp_path, close) -> None:
    config = LogConfig(segment_bytes=3000, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    for i in range(70):
        ts = 10_000 + (i * 7919) % 500  # timestamps jump back and forth
        log.append_as_leader(make_batch(2, value_size=30, base_timestamp=ts), 0, now_ms=0)
        if i == 60:
            log.flush()
    point = log.recovery_point
    if close:
        log.close()
        point = log.recovery_point
    resumed = open_log(tmp_path, config, recovery_point=point)
    state = index_state(resumed)
    resumed.close()
    full = open_log(tmp_path, config, recovery_point=0)
    assert index_state(full) == state
    full.close()


def test_damage_at_resume_position_falls_back_to_full_recovery(tmp_path) -> None:
    config = LogConfig(index_interval_bytes=100)
    log = open_log(tmp_path, config)
    fill(log, 20)
    log.close()
    segment = log.segments[-1]
    _, position = segment.offset_index.lookup_entry(log.log_end_offset)
    assert position > 0
    with active_log_path(log).open("r+b") as f:
        f.seek(position + 30)
        f.write(b"\xff\xff")
    reopened = open_log(tmp_path, config, recovery_point=log.recovery_point)
    assert read_all(reopened)[-1][1] == reopened.log_end_offset - 1
    assert reopened.active_segment.size == position
    reopened.close()


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path, LogConfig())
    fill(log, 2)
    size = log.size_in_bytes
    real = os.pwrite

    def half_then_fail(fd, data, position):
        if len(data) > 40:
            real(fd, bytes(data[:40]), position)
            return 40
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_fail)
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(make_batch(3, value_size=50), 0, now_ms=0)
    monkeypatch.setattr(os, "pwrite", real)
    assert log.size_in_bytes == size and active_log_path(log).stat().st_size == size
    assert log.append_as_leader(make_batch(1), 0, now_ms=0).first_offset == 6
    log.close()


def test_an_index_entry_refused_by_a_full_disk_does_not_fail_a_written_batch(
    tmp_path, monkeypatch
) -> None:
    """The chaos run (seed 11, 600 s, disk fault) found an idempotent record twice: the batch
    was written, its index entry hit ENOSPC, the producer got KAFKA_STORAGE_ERROR and its
    retry was appended again (the producer state never saw the first)."""
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0))
    idempotent = {"producer_id": 7, "producer_epoch": 0}
    log.append_as_leader(make_batch(2, base_sequence=0, **idempotent), 0, now_ms=0)
    real = os.pwrite

    def index_entries_fail(fd, data, position):
        if len(data) <= 12:  # an offset (8 bytes) or time (12 bytes) index entry
            raise OSError(28, "No space left on device")
        return real(fd, data, position)

    monkeypatch.setattr(os, "pwrite", index_entries_fail)
    second = make_batch(2, base_sequence=2, **idempotent)
    with contextlib.suppress(KafkaStorageError):  # refused or accepted, but not both
        log.append_as_leader(second, 0, now_ms=0)
    monkeypatch.setattr(os, "pwrite", real)
    retried = log.append_as_leader(second, 0, now_ms=0)  # the producer's retry

    assert (retried.first_offset, retried.last_offset) == (2, 3)
    assert log.log_end_offset == 4
    assert read_all(log) == [(0, 1), (2, 3)]  # each batch once
    log.close()


def test_a_leader_epoch_checkpoint_refused_by_a_full_disk_writes_nothing(
    tmp_path, monkeypatch
) -> None:
    """A new leader epoch's first append writes the epoch checkpoint: on a full disk that
    fails before the batch is written (Kafka's order), so the idempotent retry is written
    once."""
    log = open_log(tmp_path, LogConfig())
    idempotent = {"producer_id": 7, "producer_epoch": 0}
    log.append_as_leader(make_batch(2, base_sequence=0, **idempotent), 0, now_ms=0)
    real = leader_epoch.replace_unsynced

    def disk_full(path, content):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(leader_epoch, "replace_unsynced", disk_full)
    second = make_batch(2, base_sequence=2, **idempotent)
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(second, 1, now_ms=0)
    monkeypatch.setattr(leader_epoch, "replace_unsynced", real)
    retried = log.append_as_leader(second, 1, now_ms=0)

    assert (retried.first_offset, retried.last_offset) == (2, 3)
    assert read_all(log) == [(0, 1), (2, 3)]
    assert leader_epoch.LeaderEpochCache.load(log.dir).entries == log.leader_epoch_cache.entries
    log.close()


@pytest.mark.parametrize("compression", [NONE, ZSTD])
def test_keyless_records_in_a_compacted_log_are_named_by_index(tmp_path, compression) -> None:
    log = open_log(tmp_path, LogConfig(cleanup_policy="compact"))
    records = [Record(key=None if i in (1, 4, 5, 7, 8) else b"k", value=b"v") for i in range(9)]
    with pytest.raises(InvalidRecordError) as info:
        log.append_as_leader(make_batch(records, compression=compression), 0, now_ms=0)
    why = "Compacted topic cannot accept message without key in topic partition topic-0"
    assert info.value.record_errors == tuple(RecordError(i, why) for i in (1, 4, 5, 7, 8))
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in (1, 4, 5))
    assert str(info.value) == (
        "One or more records have been rejected due to 5 record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )
    assert log.log_end_offset == 0
    log.close()


def test_records_stamped_too_far_ahead_are_named_by_index(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_after_max_ms=1000))
    stamps = [5_000, 5_500, 7_000, 5_000, 9_000]
    batch = make_batch([Record(value=b"v", timestamp=t) for t in stamps], base_timestamp=5_000)
    with pytest.raises(InvalidTimestampError) as info:
        log.append_as_leader(batch, 0, now_ms=5_000)
    bounds = f"[{5_000 - 2**63 + 1}, 6000]"
    assert info.value.record_errors == tuple(
        RecordError(
            i,
            f"Timestamp {stamps[i]} of message with offset {i} is out of range. "
            f"The timestamp should be within {bounds}",
        )
        for i in (2, 4)
    )
    assert str(info.value) == "One or more records have been rejected due to invalid timestamp"
    log.close()


def test_offset_metadata_finds_batch_positions_without_reading_records(tmp_path) -> None:
    log = open_log(tmp_path)
    appended = fill(log, 8)  # 3 records a batch; SMALL rolls segments of 1000 bytes
    assert len(log.segments) > 1
    for result in appended:
        for offset in (result.first_offset, result.last_offset):
            found = log.offset_metadata(offset)
            segment = log.segments[log._segment_index(offset)]
            start = segment.batch_position(result.first_offset)
            assert (found.segment_base_offset, found.relative_position) == (
                segment.base_offset,
                start,
            )
            (header,) = [h for _, h in iter_batches(log.read(offset, 1, log.log_end_offset))]
            assert header.base_offset == result.first_offset
    end = log.offset_metadata(log.log_end_offset)
    assert end == log.log_end_offset_metadata
    assert (end.segment_base_offset, end.relative_position) == (
        log.active_segment.base_offset,
        log.active_segment.size,
    )
    assert log.offset_metadata(-1).message_offset_only


def test_offset_metadata_is_not_stale_after_a_truncation(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 2, records=3)
    before = log.offset_metadata(4)  # in the second batch: cached
    log.truncate_to(3)
    assert log.offset_metadata(3) == log.log_end_offset_metadata
    log.append_as_leader(make_batch(1, value_size=200), 0, now_ms=5)  # offset 3, larger
    log.append_as_leader(make_batch(2, value_size=20), 0, now_ms=5)  # offsets 4-5
    moved = log.offset_metadata(4)
    assert moved.relative_position > before.relative_position
    assert moved.relative_position == log.active_segment.batch_position(4)
