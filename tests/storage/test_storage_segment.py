"""LogSegment: reads with one pread, recovery results, truncation, roll timing."""

from __future__ import annotations

import os

import pytest
from batches import make_batch

from kafkalite.storage.batch import iter_batches, validate_batches
from kafkalite.storage.segment import LogSegment, file_stem


def new_segment(tmp_path, base: int = 100, interval: int = 300) -> LogSegment:
    return LogSegment.open(
        tmp_path, base, index_interval_bytes=interval, max_index_bytes=1 << 20, now_ms=0
    )


def append(segment: LogSegment, count: int = 3, value_size: int = 50, ts: int = 1000) -> None:
    batch = bytearray(make_batch(count, value_size=value_size, base_timestamp=ts))
    batch[0:8] = segment.next_offset.to_bytes(8, "big")
    segment.append(batch, validate_batches(bytes(batch), 1 << 20))


def test_file_names(tmp_path) -> None:
    segment = new_segment(tmp_path, base=42)
    assert file_stem(42) == "00000000000000000042"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]
    segment.close()


def test_read_uses_one_pread(tmp_path, monkeypatch) -> None:
    segment = new_segment(tmp_path)
    for _ in range(100):
        append(segment)
    calls = []
    real = os.pread

    def counting(fd, n, pos):
        calls.append((n, pos))
        return real(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting)
    data = segment.read(250, 2000, 10**9, min_one_batch=True)
    first = next(iter_batches(data))[1]
    assert first.base_offset <= 250 <= first.last_offset
    assert len(calls) == 1
    segment.close()


def test_read_respects_max_offset_and_max_bytes(tmp_path) -> None:
    segment = new_segment(tmp_path)
    for _ in range(10):
        append(segment)
    one = segment.size // 10
    assert len(segment.read(100, 3 * one, 10**9, False)) == 3 * one
    assert len(segment.read(100, 3 * one - 1, 10**9, False)) == 2 * one
    assert len(segment.read(100, 10**6, 106, False)) == 2 * one  # batches 100-102, 103-105
    assert segment.read(130, 10**6, 10**9, True) == b""
    segment.close()


def test_recover_reports_truncated_bytes_and_rebuilds_indexes(tmp_path) -> None:
    segment = new_segment(tmp_path, interval=100)
    for _ in range(20):
        append(segment)
    entries = len(segment.offset_index)
    size = segment.size
    os.pwrite(segment.fd, b"\x00" * 7, size)
    assert segment.recover(1 << 20) == 7
    assert segment.size == size and segment.next_offset == 160
    assert len(segment.offset_index) == entries
    seen = []
    assert segment.recover(1 << 20, seen.append) == 0
    assert [h.base_offset for h in seen] == list(range(100, 160, 3))
    segment.close()


def test_recover_rejects_crc_and_offset_errors(tmp_path) -> None:
    segment = new_segment(tmp_path)
    for _ in range(5):
        append(segment)
    one = segment.size // 5
    os.pwrite(segment.fd, b"\xee", 3 * one + 70)  # corrupt the 4th batch's records
    assert segment.recover(1 << 20) == 2 * one
    assert segment.next_offset == 109
    os.pwrite(segment.fd, (0).to_bytes(8, "big"), 0)  # base offset below the segment base
    assert segment.recover(1 << 20) == 3 * one
    assert segment.size == 0 and segment.next_offset == 100
    segment.close()


def test_truncate_to_mid_batch_drops_whole_batch(tmp_path) -> None:
    segment = new_segment(tmp_path, interval=50)
    for _ in range(10):
        append(segment, ts=1000)
    append(segment, ts=5000)
    assert segment.max_timestamp == 5000
    one = (segment.size) // 11
    assert segment.truncate_to(107, now_ms=0) == 9 * one
    assert segment.next_offset == 106 and segment.size == 2 * one
    assert segment.max_timestamp == 1000
    assert all(off < 106 for off in [segment.offset_index.last_offset])
    assert segment.truncate_to(100, now_ms=77) == 2 * one
    assert segment.created_ms == 77 and segment.max_timestamp == -1
    segment.close()


def test_reopen_reads_next_offset_and_max_timestamp(tmp_path) -> None:
    segment = new_segment(tmp_path, interval=100)
    for ts in (10, 30, 20, 25):
        append(segment, ts=ts)
    segment.close()
    reopened = new_segment(tmp_path, interval=100)
    assert not reopened.needs_recovery
    assert reopened.next_offset == 112
    assert reopened.max_timestamp_and_offset == (30, 105)
    assert reopened.find_offset_by_timestamp(21, 100) == (103, 30, -1)
    reopened.close()


@pytest.mark.parametrize(("first_ts", "now", "message_ts", "waited"), [(1000, 0, 1500, 500)])
def test_time_waited_for_roll(tmp_path, first_ts, now, message_ts, waited) -> None:
    segment = new_segment(tmp_path)
    assert segment.time_waited_for_roll(now_ms=250, message_timestamp=10**9) == 250
    append(segment, ts=first_ts)
    assert segment.time_waited_for_roll(now, message_ts) == waited
    segment.close()
    reopened = new_segment(tmp_path)
    assert reopened.time_waited_for_roll(now, message_ts) == waited  # loaded lazily
    reopened.close()


def test_delete_removes_files(tmp_path) -> None:
    segment = new_segment(tmp_path)
    append(segment)
    segment.delete()
    assert list(tmp_path.iterdir()) == []
