"""Header indexes: per segment, which values of the indexed headers each batch holds, so a
view's read skips the batches its filter rules out without reading them (issue 18).

A topic names the headers to index with `kafkalite.index.headers` (LogConfig.index_headers).
The index of a segment lists its batches in order: position, header (what an empty batch in
their place needs), and per indexed header the set of values the batch's records carry
(None: a record lacks it or its value is null); control batches have no values. It is kept
in memory, built from the segment itself on demand as view reads reach its batches, on
every broker from its own log (leader or follower alike). Once a rolled segment is indexed
whole, the index is stored beside it (`<base>.headerindex`, storage/header_index_file.py),
and after a restart a view's read takes it from there instead of reading the segment. It
is built again from the segment when that file is missing, torn or stale: after recovery
from the recovered files, after truncation from what is left (the last indexed batch is
checked before the index is extended; truncation removes the file), after compaction for
the new segments (a segment's file goes with it and when a cleaned segment takes its name).

`read_indexed` is UnifiedLog.read for a view: a batch the index rules out becomes an empty
batch over its offsets (storage/record_filter.py explains why) built from the index alone;
control batches and batches that may match are read and filtered.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from kafkalite.storage import header_index_file
from kafkalite.storage.batch import HEADER_SIZE, BatchHeader, parse_header
from kafkalite.storage.errors import CorruptIndexError, OffsetOutOfRangeError
from kafkalite.storage.header_index_file import IndexedBatch, StoredIndex, ValueSets
from kafkalite.storage.log import UnifiedLog
from kafkalite.storage.record_filter import (
    FilterStats,
    RecordMatcher,
    filter_batches,
    scan_records,
)
from kafkalite.storage.records import NONE, decompress, frame_batch
from kafkalite.storage.segment import LogSegment, header_index_path, scan_headers

logger = logging.getLogger("kafkalite.storage")

# What the index says of a batch for a view's filter: no record, some or every record
# matches (broker/view_filter.py's Filter.classify).
NO_RECORD, SOME_RECORDS, EVERY_RECORD = 0, 1, 2
# A view's read covers at most this many source bytes per byte it may return: a selective
# view answers after a bounded walk, and the consumer fetches on from where it stopped.
SOURCE_BYTES_PER_ANSWER_BYTE = 16
INDEX_CHUNK = 4 * 1024 * 1024  # bytes of segment indexed at a time


def index_names(config_value: str) -> frozenset[str]:
    """The header names of a `kafkalite.index.headers` value ("tag,region")."""
    return frozenset(name.strip() for name in config_value.split(",") if name.strip())


@dataclass
class SegmentHeaderIndex:
    """One segment's batches and their indexed header values, built up to `upto`."""

    names: frozenset[str]
    entries: list[IndexedBatch] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)  # for the bisect by offset
    upto: int = 0  # file position indexed so far
    bytes_read: int = 0  # from the segment, to index it and for the reads through it
    # Batches read to index them, by position, for the read that made the index go on to
    # take instead of reading them again (dropped at the next extension).
    recent: dict[int, bytes] = field(default_factory=dict)
    saved: bool = False  # in the segment's header index file as it is

    @classmethod
    def stored(cls, stored: StoredIndex) -> SegmentHeaderIndex:
        entries = stored.entries
        last_offsets = [entry.header.last_offset for entry in entries]
        return cls(stored.names, entries, last_offsets, stored.upto, saved=True)

    def still_matches(self, segment: LogSegment) -> bool:
        """False when the segment was truncated below the last indexed batch."""
        if not self.entries:
            return segment.size >= self.upto
        last = self.entries[-1]
        if segment.size < last.position + last.header.size:
            return False
        raw = os.pread(segment.fd, HEADER_SIZE, last.position)
        return len(raw) == HEADER_SIZE and parse_header(raw) == last.header

    def extend(self, segment: LogSegment, until: int) -> bool:
        """Index the batches from `upto` to about `until`; False when nothing was left."""
        wanted = frozenset(name.encode() for name in self.names)
        added = False
        self.recent = {}
        for position, header in scan_headers(segment.fd, self.upto, segment.size):
            batch = segment.read_batch(position, header)
            self.bytes_read += len(batch)
            self.recent[position] = batch
            value_sets = _value_sets(batch, header, wanted)
            self.entries.append(IndexedBatch(position, header, value_sets))
            self.last_offsets.append(header.last_offset)
            self.upto = position + header.size
            self.saved = False
            added = True
            if self.upto >= until:
                break
        return added

    def batches_from(self, segment: LogSegment, offset: int) -> Iterator[IndexedBatch]:
        """The batches whose last offset is at least `offset`, indexing as it goes."""
        index = bisect_left(self.last_offsets, offset)
        while True:
            while index < len(self.entries):
                yield self.entries[index]
                index += 1
            if not self.extend(segment, self.upto + INDEX_CHUNK):
                return
            index = max(index, bisect_left(self.last_offsets, offset))

    def read_batch(self, segment: LogSegment, entry: IndexedBatch) -> bytes:
        """The batch's bytes: as indexing just read them, or from the segment."""
        batch = self.recent.pop(entry.position, None)
        if batch is None:
            batch = segment.read_batch(entry.position, entry.header)
            self.bytes_read += len(batch)
        return batch


def _value_sets(batch: bytes, header: BatchHeader, wanted: frozenset[bytes]) -> ValueSets | None:
    if header.is_control:
        return None
    payload = decompress(header.compression, memoryview(batch)[HEADER_SIZE:])
    found: dict[bytes, set[bytes | None]] = {name: set() for name in wanted}
    for _, _, _, values in scan_records(payload, header.records_count, wanted):
        for name, seen in found.items():
            seen.add(values.get(name))
    return tuple(
        sorted(
            (
                name.decode(),
                frozenset(None if v is None else v.decode("utf-8", "replace") for v in seen),
            )
            for name, seen in found.items()
        )
    )


class HeaderIndexes:
    """The header index of each segment, for as long as the segment object lives: from its
    header index file when there is a good one, else built from the segment."""

    def __init__(self) -> None:
        self._by_segment: WeakKeyDictionary[LogSegment, SegmentHeaderIndex] = WeakKeyDictionary()

    def of(self, segment: LogSegment, names: frozenset[str]) -> SegmentHeaderIndex:
        index = self._by_segment.get(segment)
        if index is None or index.names != names or not index.still_matches(segment):
            index = _load(segment, names) or SegmentHeaderIndex(names)
            self._by_segment[segment] = index
        return index

    def save(self, segment: LogSegment, index: SegmentHeaderIndex) -> None:
        """Store a rolled segment's index once it covers the whole segment."""
        if index.saved or segment.suffix or index.upto != segment.size or not index.entries:
            return
        stored = StoredIndex(segment.base_offset, index.upto, index.names, index.entries)
        try:
            header_index_file.save(header_index_path(segment.dir, segment.base_offset), stored)
        except OSError as exc:  # a cache: the next reopen builds it again
            logger.warning("cannot write the header index of %s: %s", segment.dir, exc)
            return
        index.saved = True


def _load(segment: LogSegment, names: frozenset[str]) -> SegmentHeaderIndex | None:
    """The segment's stored index if it is of these names and still of this segment; a
    torn or stale file is removed (the index is built again and saved anew)."""
    if segment.suffix:
        return None
    path = header_index_path(segment.dir, segment.base_offset)
    try:
        stored = header_index_file.load(path)
    except CorruptIndexError as exc:
        logger.warning("%s; rebuilding it", exc)
        segment.drop_header_index()
        return None
    if stored is None or stored.names != names:
        return None
    index = SegmentHeaderIndex.stored(stored)
    if stored.base_offset != segment.base_offset or not index.still_matches(segment):
        logger.info("header index %s is stale; rebuilding it", path)
        segment.drop_header_index()
        return None
    return index


@dataclass
class _Answer:
    """The batches of a view read so far, and the bounds it works within."""

    max_bytes: int
    min_one_batch: bool
    out: bytearray = field(default_factory=bytearray)
    walked: int = 0  # source bytes covered

    def full(self, next_size: int) -> bool:
        if self.min_one_batch and not self.out:
            return False
        if len(self.out) + next_size > self.max_bytes:
            return True
        return self.walked >= self.max_bytes * SOURCE_BYTES_PER_ANSWER_BYTE


def read_indexed(
    log: UnifiedLog,
    indexes: HeaderIndexes,
    names: frozenset[str],
    offset: int,
    max_bytes: int,
    max_offset: int,
    min_one_batch: bool,
    classify: Callable[[ValueSets], int],
    matcher: RecordMatcher,
    stats: FilterStats,
) -> bytes:
    """UnifiedLog.read for a view over a topic with indexed headers: the batches from the
    one holding `offset`, below `max_offset`, filtered; those `classify` rules out are
    not read, those it says match whole are sent as stored. Stops at `max_bytes` of
    answer (a first batch whole) or after SOURCE_BYTES_PER_ANSWER_BYTE times as many
    source bytes."""
    end = log.log_end_offset
    if offset < log.log_start_offset or offset > end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is out of range [{log.log_start_offset}, {end}] for {log.dir}"
        )
    answer = _Answer(max_bytes, min_one_batch)
    active = log.active_segment
    for segment in log.segments_from(offset):
        index = indexes.of(segment, names)
        read_before = index.bytes_read
        try:
            if _answer_from(
                index, segment, offset, min(max_offset, end), answer, classify, matcher, stats
            ):
                break
        finally:
            index.recent = {}  # what indexing read and this read did not take
            stats.bytes_read += index.bytes_read - read_before
            if segment is not active:
                indexes.save(segment, index)
    stats.bytes_served += len(answer.out)
    return bytes(answer.out)


def _answer_from(
    index: SegmentHeaderIndex,
    segment: LogSegment,
    offset: int,
    max_offset: int,
    answer: _Answer,
    classify: Callable[[ValueSets], int],
    matcher: RecordMatcher,
    stats: FilterStats,
) -> bool:
    """Add the segment's batches from `offset` to the answer; True once it is complete."""
    for entry in index.batches_from(segment, offset):
        header = entry.header
        if header.base_offset >= max_offset:
            return True
        verdict = SOME_RECORDS if entry.value_sets is None else classify(entry.value_sets)
        skip = verdict == NO_RECORD
        if skip:
            data = frame_batch(header, b"", 0, NONE)
        else:
            data = index.read_batch(segment, entry)
            if entry.value_sets is not None and verdict == SOME_RECORDS:
                data = filter_batches(data, matcher, stats)
        if answer.full(len(data)):
            return True
        answer.out += data
        answer.walked += header.size
        if skip:
            stats.batches_skipped += 1
            stats.bytes_skipped += header.size
        elif verdict == EVERY_RECORD:
            stats.batches_whole += 1
            stats.records_matched += header.records_count
    return False
