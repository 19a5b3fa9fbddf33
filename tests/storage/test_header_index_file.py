"""storage/header_index_file.py: a rolled segment's header index is stored beside it once a
view's read has indexed it whole; a reopened log's reads take it from there instead of
reading the segment; a missing, torn or stale file is rebuilt from the segment; the file
goes with its segment (deletion, truncation, renames of the cleaner's swap)."""

from __future__ import annotations

from pathlib import Path

import pytest
from batches import LZ4, Record, make_batch

from kafkalite.broker.view_filter import parse
from kafkalite.storage import header_index_file
from kafkalite.storage.batch import HEADER_SIZE, iter_batches, parse_header
from kafkalite.storage.control_batch import EndTxnMarker, encode_marker
from kafkalite.storage.errors import CorruptIndexError
from kafkalite.storage.header_index import HeaderIndexes, index_names, read_indexed
from kafkalite.storage.header_index_file import IndexedBatch, StoredIndex
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.record_filter import FilterStats
from kafkalite.storage.records import decode_records
from kafkalite.storage.segment import DELETED_SUFFIX, header_index_path

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=200, index_headers="region")
NAMES = index_names(CONFIG.index_headers)
EU = parse("region = 'eu'")
BATCHES = 40
EU_OFFSETS = [o for b in range(0, BATCHES, 10) for o in range(b * 5, b * 5 + 5)]


def _batch(i: int) -> bytes:
    region = b"eu" if i % 10 == 0 else (b"us" if i % 2 else b"apac")
    records = [
        Record(key=b"k%d-%d" % (i, r), value=b"v" * 30, headers=(("region", region),))
        for r in range(5)
    ]
    return make_batch(records, compression=LZ4 if i % 3 == 0 else 0)


def _log(tmp_path: Path) -> UnifiedLog:
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, now_ms=0)
    for i in range(BATCHES):
        log.append_as_leader(_batch(i), 0, now_ms=i)
    return log


def _reopen(tmp_path: Path) -> UnifiedLog:
    return UnifiedLog.open(tmp_path / "orders-0", CONFIG, now_ms=1000)


def _read_all(log: UnifiedLog, indexes: HeaderIndexes) -> tuple[list[int], FilterStats]:
    """The offsets a view reading `log` from 0 returns, and what the reads did."""
    stats, offsets, offset = FilterStats(), [], 0
    while offset < log.log_end_offset:
        data = read_indexed(
            log,
            indexes,
            NAMES,
            offset,
            100_000,
            log.log_end_offset,
            True,
            lambda sets: EU.classify(sets, NAMES),
            EU,
            stats,
        )
        offset, found = _offsets(data, offset)
        offsets += found
    return offsets, stats


def _offsets(data: bytes, start: int) -> tuple[int, list[int]]:
    found, end = [], start
    for pos, header in iter_batches(data):
        found += [r.offset for r in decode_records(data[pos : pos + header.size])]
        end = header.next_offset
    return end, found


def _scan_all(log: UnifiedLog) -> list[int]:
    """The "eu" offsets of `log`, every batch read and decoded (no index)."""
    found, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 100_000, log.log_end_offset)
        for pos, header in iter_batches(data):
            records = decode_records(data[pos : pos + header.size])
            found += [r.offset for r in records if dict(r.headers).get("region") == b"eu"]
            offset = header.next_offset
    return found


def _files(log: UnifiedLog) -> list[Path]:
    return sorted(log.dir.glob("*.headerindex"))


def _rolled(log: UnifiedLog) -> list[int]:
    return [s.base_offset for s in log.segments[:-1]]


def test_rolled_segments_are_stored_and_loaded_instead_of_read(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert len(log.segments) >= 3
    assert _read_all(log, HeaderIndexes())[0] == EU_OFFSETS
    # Every rolled segment has its file; the active one (still growing) has none.
    assert _files(log) == [header_index_path(log.dir, base) for base in _rolled(log)]
    log.close()

    reopened = _reopen(tmp_path)
    got, stats = _read_all(reopened, HeaderIndexes())
    assert got == EU_OFFSETS
    eu_bytes = sum(len(_batch(i)) for i in range(0, BATCHES, 10))
    active = reopened.active_segment.size
    # Only the "eu" batches and the active segment (indexed from itself) were read.
    assert stats.bytes_read <= eu_bytes + active
    assert stats.batches_skipped == BATCHES - BATCHES // 10
    reopened.close()


@pytest.mark.parametrize("damage", ["torn", "empty", "flipped byte", "other names"])
def test_a_bad_file_is_rebuilt_from_the_segment(tmp_path: Path, damage: str) -> None:
    log = _log(tmp_path)
    _read_all(log, HeaderIndexes())
    log.close()
    path = header_index_path(log.dir, 0)
    good = path.read_bytes()
    if damage == "torn":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "flipped byte":
        path.write_bytes(good[:40] + bytes([good[40] ^ 0xFF]) + good[41:])
    else:
        stored = header_index_file.decode(good, path)
        other = StoredIndex(stored.base_offset, stored.upto, frozenset({"tag"}), [])
        path.write_bytes(header_index_file.encode(other))

    reopened = _reopen(tmp_path)
    got, stats = _read_all(reopened, HeaderIndexes())
    assert got == EU_OFFSETS
    assert stats.bytes_read >= reopened.segments[0].size  # the first segment read again
    assert path.read_bytes() == good  # and its file written anew
    reopened.close()


def test_a_stale_file_is_rebuilt(tmp_path: Path) -> None:
    """A file whose last batch is not the segment's (a segment replaced under its name)."""
    log = _log(tmp_path)
    _read_all(log, HeaderIndexes())
    log.close()
    first, second = header_index_path(log.dir, 0), header_index_path(log.dir, _rolled(log)[1])
    stored = header_index_file.decode(second.read_bytes(), second)
    moved = StoredIndex(0, stored.upto, stored.names, stored.entries)
    first.write_bytes(header_index_file.encode(moved))  # a valid file, of other batches

    reopened = _reopen(tmp_path)
    assert _read_all(reopened, HeaderIndexes())[0] == EU_OFFSETS
    rebuilt = header_index_file.decode(first.read_bytes(), first)
    assert rebuilt.entries[0].header.base_offset == 0
    reopened.close()


def test_the_file_goes_with_its_segment(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _read_all(log, HeaderIndexes())
    bases = _rolled(log)
    # Truncation into a rolled segment: its file goes, later segments go whole.
    log.truncate_to(bases[1] + 5)
    assert _files(log) == [header_index_path(log.dir, bases[0])]
    # Renamed for asynchronous deletion or replaced by a cleaned segment: the file goes.
    log.segments[0].change_suffix(DELETED_SUFFIX)
    assert _files(log) == []
    log.segments[0].change_suffix("")
    _read_all(log, HeaderIndexes())
    assert _files(log) == [header_index_path(log.dir, bases[0])]
    log.segments[0].delete()
    assert _files(log) == []
    log.close()


def test_an_orphaned_file_is_removed_when_the_log_opens(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.close()
    orphan = header_index_path(log.dir, 999_999)
    orphan.write_bytes(b"left behind")
    _reopen(tmp_path).close()
    assert not orphan.exists()


def test_the_encoding_round_trips_control_batches_and_nulls(tmp_path: Path) -> None:
    data = make_batch([Record(key=b"k", headers=(("region", b"eu"),))])
    marker = encode_marker(7, 1, EndTxnMarker(commit=True, coordinator_epoch=0), 0)
    entries = [
        IndexedBatch(
            0,
            parse_header(data[:HEADER_SIZE]),
            (("region", frozenset({"eu", None})), ("tag", frozenset({"a"}))),
        ),
        IndexedBatch(len(data), parse_header(marker[:HEADER_SIZE]), None),
    ]
    stored = StoredIndex(0, len(data) + len(marker), frozenset({"region", "tag"}), entries)
    path = tmp_path / "x.headerindex"
    assert header_index_file.decode(header_index_file.encode(stored), path) == stored
    with pytest.raises(CorruptIndexError):
        header_index_file.decode(b"KLHI" + bytes(30), path)


def test_compaction_leaves_no_stale_file_and_the_new_segments_get_theirs(tmp_path: Path) -> None:
    config = LogConfig(
        segment_bytes=600,
        index_interval_bytes=100,
        cleanup_policy="compact",
        index_headers="region",
    )
    log = UnifiedLog.open(tmp_path / "compacted-0", config, now_ms=0)
    for i in range(60):  # single-record batches over 6 keys, "eu" on every third
        region = b"eu" if i % 3 == 0 else b"us"
        record = Record(key=b"k%d" % (i % 6), value=b"v%d" % i, headers=(("region", region),))
        log.append_as_leader(make_batch([record], base_timestamp=1_000), 0, now_ms=1_000)
    _read_all(log, HeaderIndexes())
    assert len(_files(log)) == len(log.segments) - 1

    assert log.compact(now_ms=2_000) is not None
    log.close()
    reopened = UnifiedLog.open(tmp_path / "compacted-0", config, now_ms=3_000)
    for path in _files(reopened):  # what is left is of the segment now under its name
        segment = next(
            s for s in reopened.segments if header_index_path(s.dir, s.base_offset) == path
        )
        stored = header_index_file.decode(path.read_bytes(), path)
        assert stored.upto == segment.size
    got, _ = _read_all(reopened, HeaderIndexes())
    scanned = _scan_all(reopened)
    assert got == scanned and got
    assert _files(reopened) == [header_index_path(reopened.dir, base) for base in _rolled(reopened)]
    reopened.close()
