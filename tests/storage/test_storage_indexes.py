"""OffsetIndex and TimeIndex: lookups against brute force, truncation, sanity checks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.storage.errors import CorruptIndexError
from kafkalite.storage.offset_index import OffsetIndex
from kafkalite.storage.time_index import TimeIndex

BASE = 1000

increasing = st.lists(st.integers(1, 50), min_size=0, max_size=60).map(
    lambda steps: [sum(steps[: i + 1]) for i in range(len(steps))]
)


def brute_offset_lookup(entries: list[tuple[int, int]], offset: int) -> int:
    candidates = [pos for off, pos in entries if off <= offset]
    return candidates[-1] if candidates else 0


@given(increasing, st.integers(BASE - 5, BASE + 3000))
def test_offset_lookup_matches_brute_force(tmp_path_factory, relative, target) -> None:
    path = tmp_path_factory.mktemp("idx") / "0.index"
    index = OffsetIndex.open(path, BASE, 1 << 20)
    entries = [(BASE + r, r * 10) for r in relative]
    for offset, position in entries:
        index.append(offset, position)
    assert index.lookup(target) == brute_offset_lookup(entries, target)
    index.close()
    reopened = OffsetIndex.open(path, BASE, 1 << 20)
    assert reopened.lookup(target) == brute_offset_lookup(entries, target)
    reopened.close()


@given(increasing, st.integers(BASE, BASE + 3000))
def test_offset_truncate_drops_entries_at_or_after(tmp_path_factory, relative, cut) -> None:
    path = tmp_path_factory.mktemp("idx") / "0.index"
    index = OffsetIndex.open(path, BASE, 1 << 20)
    for r in relative:
        index.append(BASE + r, r * 10)
    index.truncate_to(cut)
    kept = [r for r in relative if BASE + r < cut]
    assert len(index) == len(kept)
    assert path.stat().st_size == 8 * len(kept)
    index.close()


def test_offset_index_file_format_is_kafkas(tmp_path) -> None:
    index = OffsetIndex.open(tmp_path / "a.index", BASE, 1 << 20)
    index.append(BASE + 7, 4096)
    index.append(BASE + 7, 5000)  # not increasing: ignored
    index.close()
    assert (tmp_path / "a.index").read_bytes() == struct.pack(">ii", 7, 4096)


def test_offset_index_full(tmp_path) -> None:
    index = OffsetIndex.open(tmp_path / "a.index", 0, 16)
    index.append(1, 10)
    assert not index.is_full
    index.append(2, 20)
    assert index.is_full
    index.close()


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 7,  # not a multiple of 8
        struct.pack(">iiii", 5, 100, 3, 200),  # offsets go backwards
        struct.pack(">iiii", 5, 300, 6, 200),  # positions go backwards
        struct.pack(">ii", 5, 10_000),  # points past the segment end
    ],
)
def test_offset_index_sanity_check(tmp_path, content) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        index = OffsetIndex.open(path, 0, 1 << 20)
        try:
            index.sanity_check(segment_size=1000)
        finally:
            index.close()


timed = st.lists(st.tuples(st.integers(1, 100), st.integers(0, 5)), max_size=60)


@given(timed, st.integers(0, 5000))
def test_time_lookup_matches_brute_force(tmp_path_factory, steps, target) -> None:
    path = tmp_path_factory.mktemp("tidx") / "0.timeindex"
    index = TimeIndex.open(path, BASE, 1 << 20)
    appended, ts, offset = [], 0, BASE
    for ts_step, offset_step in steps:
        ts, offset = ts + ts_step - 30, offset + offset_step  # timestamps also go backwards
        if ts > (appended[-1][0] if appended else -1):
            appended.append((ts, offset))
        index.maybe_append(ts, offset)
    older = [entry for entry in appended if entry[0] <= target]
    expected = older[-1] if older else (-1, BASE)
    assert index.lookup(target) == expected
    index.close()
    reopened = TimeIndex.open(path, BASE, 1 << 20)
    reopened.sanity_check()
    assert reopened.lookup(target) == expected
    reopened.close()


def test_time_index_truncate_and_last_entry(tmp_path) -> None:
    index = TimeIndex.open(tmp_path / "a.timeindex", BASE, 1 << 20)
    assert index.last_entry == (-1, BASE)
    index.maybe_append(-1, BASE)  # no timestamp: never indexed
    assert len(index) == 0
    index.maybe_append(10, BASE + 1)
    index.maybe_append(10, BASE + 2)
    index.maybe_append(20, BASE + 5)
    assert len(index) == 2
    index.truncate_to(BASE + 5)
    assert index.last_entry == (10, BASE + 1)
    assert (tmp_path / "a.timeindex").stat().st_size == 12
    index.close()


def test_time_index_sanity_check(tmp_path) -> None:
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 20, 1, 10, 2))
    index = TimeIndex.open(path, 0, 1 << 20)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()
    path.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndexError):
        TimeIndex.open(path, 0, 1 << 20)


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        (OffsetIndex, struct.pack(">iiii", -5, 0, 2, 10)),
        (TimeIndex, struct.pack(">qiqi", 5, -5, 10, 2)),
    ],
    ids=["offset", "time"],
)
def test_reset_empties_an_index_with_entries_below_its_base(tmp_path, kind, content) -> None:
    """Recovery resets an index that failed its sanity check: no corrupt entry may stay."""
    path = tmp_path / "a.index"
    path.write_bytes(content)
    index = kind.open(path, BASE, 1 << 20)
    index.reset()
    assert (len(index), path.stat().st_size) == (0, 0)
    index.close()
