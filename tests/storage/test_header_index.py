"""storage/header_index.py: a view's read through the header index returns what filtering
every batch returns, without reading the batches the index rules out; the index follows
appends, truncation and new segments."""

from __future__ import annotations

import tempfile
from pathlib import Path

from batches import LZ4, Record, make_batch
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.view_filter import parse
from kafkalite.storage.batch import iter_batches
from kafkalite.storage.header_index import (
    SOURCE_BYTES_PER_ANSWER_BYTE,
    HeaderIndexes,
    index_names,
    read_indexed,
)
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.record_filter import FilterStats, filter_batches
from kafkalite.storage.records import decode_records

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=200, index_headers="region")
NAMES = index_names(CONFIG.index_headers)
EU = parse("region = 'eu'")


def _batch(i: int) -> bytes:
    region = b"eu" if i % 10 == 0 else (b"us" if i % 2 else b"apac")
    records = [
        Record(key=b"k%d-%d" % (i, r), value=b"v" * 30, headers=(("region", region),))
        for r in range(5)
    ]
    return make_batch(records, compression=LZ4 if i % 3 == 0 else 0)


def _log(tmp_path: Path, batches: int) -> UnifiedLog:
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, now_ms=0)
    for i in range(batches):
        log.append_as_leader(_batch(i), 0, now_ms=i)
    return log


def _records(data: bytes) -> list[tuple[int, bytes | None]]:
    out = []
    for pos, header in iter_batches(data):
        out += [(r.offset, r.key) for r in decode_records(data[pos : pos + header.size])]
    return out


def _read_to_end(log: UnifiedLog, read: object, max_bytes: int = 2000) -> tuple[list, int]:
    """Every record a consumer gets fetching from 0, and how many fetches it took."""
    got, offset, fetches = [], 0, 0
    while offset < log.log_end_offset:
        data = read(offset, max_bytes)  # type: ignore[operator]
        fetches += 1
        assert data, offset
        got += [r for r in _records(data) if r[0] >= offset]
        offset = [h for _, h in iter_batches(data)][-1].next_offset
    return got, fetches


def _indexed(log: UnifiedLog, indexes: HeaderIndexes, stats: FilterStats) -> object:
    return lambda offset, max_bytes: read_indexed(
        log,
        indexes,
        NAMES,
        offset,
        max_bytes,
        log.log_end_offset,
        True,
        lambda sets: EU.classify(sets, NAMES),
        EU,
        stats,
    )


def _scanned(log: UnifiedLog) -> object:
    return lambda offset, max_bytes: filter_batches(
        log.read(offset, max_bytes, log.log_end_offset), EU
    )


def test_the_index_skips_batches_without_the_value_and_answers_the_same(tmp_path) -> None:
    log = _log(tmp_path, 60)
    assert len(log.segments) > 3
    stats = FilterStats()
    got, _ = _read_to_end(log, _indexed(log, HeaderIndexes(), stats))
    expected, _ = _read_to_end(log, _scanned(log))
    assert got == expected and len(got) == 6 * 5  # batches 0, 10, ..., 50
    assert stats.batches_skipped == 54  # never read: only the 6 "eu" batches were
    # The "eu" batches match whole by the index: sent as stored, without a scan.
    assert (stats.batches_whole, stats.records_matched, stats.records_read) == (6, 30, 0)
    assert stats.bytes_in == 0
    log.close()


def test_the_index_follows_appends_truncation_and_restarts(tmp_path) -> None:
    log = _log(tmp_path, 25)
    indexes = HeaderIndexes()
    read = _indexed(log, indexes, FilterStats())
    expected = [*range(0, 5), *range(50, 55), *range(100, 105)]
    assert [o for o, _ in _read_to_end(log, read)[0]] == expected
    log.truncate_to(50)  # batch 10 on: gone, then other batches take their offsets
    for i in range(10, 14):
        log.append_as_leader(_batch(i + 1), 0, now_ms=100 + i)  # no "eu" where it was
    assert [o for o, _ in _read_to_end(log, read)[0]] == [*range(0, 5)]
    log.append_as_leader(_batch(0), 0, now_ms=200)  # an "eu" batch at the end
    assert [o for o, _ in _read_to_end(log, read)[0]] == [*range(0, 5), *range(70, 75)]
    log.close()
    reopened = UnifiedLog.open(tmp_path / "orders-0", CONFIG, now_ms=300)
    read = _indexed(reopened, HeaderIndexes(), FilterStats())
    assert [o for o, _ in _read_to_end(reopened, read)[0]] == [*range(0, 5), *range(70, 75)]
    reopened.close()


def test_an_answer_covers_contiguous_offsets_within_max_bytes(tmp_path) -> None:
    log = _log(tmp_path, 200)
    read = _indexed(log, HeaderIndexes(), FilterStats())
    data = read(5, 1000)  # from batch 1: empty batches (61 bytes each) and "eu" batches
    headers = [h for _, h in iter_batches(data)]
    assert 0 < len(data) <= 1000
    assert headers[0].base_offset == 5
    assert all(a.next_offset == b.base_offset for a, b in zip(headers, headers[1:], strict=False))
    got, fetches = _read_to_end(log, read, max_bytes=1000)
    assert len(got) == 20 * 5 and fetches > 1
    assert SOURCE_BYTES_PER_ANSWER_BYTE * 1000 < log.segments[-1].size * len(log.segments)
    log.close()


def test_batches_the_index_cannot_decide_are_scanned(tmp_path) -> None:
    log = UnifiedLog.open(tmp_path / "mixed-0", CONFIG, now_ms=0)
    for i in range(12):  # each batch: one "eu" record among "us" ones
        records = [
            Record(key=b"k%d" % r, headers=(("region", b"eu" if r == i % 4 else b"us"),))
            for r in range(4)
        ]
        log.append_as_leader(make_batch(records), 0, now_ms=i)
    stats = FilterStats()
    got, _ = _read_to_end(log, _indexed(log, HeaderIndexes(), stats))
    assert got == _read_to_end(log, _scanned(log))[0] and len(got) == 12
    assert (stats.batches_skipped, stats.batches_whole, stats.records_read) == (0, 0, 48)
    log.close()


_REGIONS = st.sampled_from([b"eu", b"us", b"apac"])
_BATCH_REGIONS = st.lists(
    st.lists(st.one_of(st.none(), _REGIONS), min_size=1, max_size=4), min_size=1, max_size=25
)


@settings(max_examples=25, deadline=None)
@given(
    _BATCH_REGIONS,
    st.sampled_from(
        [
            "region = 'eu'",
            "region IN ('eu', 'us') AND __key IS NOT NULL",
            "region IS NULL",
            "NOT region = 'us'",
        ]
    ),
    st.integers(min_value=100, max_value=3000),
)
def test_indexed_reads_answer_as_scanning_reads(
    batches: list[list[bytes | None]], text: str, max_bytes: int
) -> None:
    f = parse(text)
    with tempfile.TemporaryDirectory() as tmp:
        log = UnifiedLog.open(Path(tmp) / "t-0", CONFIG, now_ms=0)
        for n, regions in enumerate(batches):
            records = [
                Record(key=b"k%d" % n, headers=() if r is None else (("region", r),))
                for r in regions
            ]
            log.append_as_leader(make_batch(records, compression=LZ4 if n % 2 else 0), 0, now_ms=n)
        indexed = lambda offset, mb: read_indexed(  # noqa: E731
            log,
            HeaderIndexes(),
            NAMES,
            offset,
            mb,
            log.log_end_offset,
            True,
            lambda sets: f.classify(sets, NAMES),
            f,
            FilterStats(),
        )
        scanned = lambda offset, mb: filter_batches(  # noqa: E731
            log.read(offset, mb, log.log_end_offset), f
        )
        assert _read_to_end(log, indexed, max_bytes)[0] == _read_to_end(log, scanned, max_bytes)[0]
        log.close()
