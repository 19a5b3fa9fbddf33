"""LogSegment: one `<base offset>.log` file of whole batches plus its offset and time indexes.

All I/O goes straight to file descriptors (pwrite/pread), so an append has reached the OS
when it returns; fsync happens only in `flush`. Reads and scans work on whole batches and
only parse batch headers; records are decoded solely for timestamp lookups.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalite.storage.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    parse_header,
)
from kafkalite.storage.errors import CorruptIndexError
from kafkalite.storage.file_cache import CachedFile
from kafkalite.storage.offset_index import OffsetIndex
from kafkalite.storage.records import record_timestamps
from kafkalite.storage.time_index import NO_TIMESTAMP, TimeIndex

log = logging.getLogger("kafkalite.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"  # a cleaner's segment being written: discarded on load
SWAP_SUFFIX = ".swap"  # a cleaned segment committed to replace old ones: completed on load
DELETED_SUFFIX = ".deleted"  # a segment removed from its log, its files not yet: dropped on load
# A rolled segment's header index (storage/header_index_file.py): a cache of the segment,
# removed whenever the segment changes or goes, rebuilt from it when missing or stale.
HEADER_INDEX_SUFFIX = ".headerindex"
INT32_MAX = 2**31 - 1
FIRST_SCAN_CHUNK = 16 << 10
SCAN_CHUNK = 1 << 20  # header scans read up to this much per pread
RECOVER_CHUNK = 8 << 20
READ_SLACK = 64 << 10  # extra bytes read so the first pread usually covers the batches
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

# baseOffset i64, batchLength i32 at 0 and lastOffsetDelta i32 at 23: enough to walk a read
_BASE_AND_LENGTH = struct.Struct(">qi")
_I32 = struct.Struct(">i")
LAST_OFFSET_DELTA_OFFSET = 23


def file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_paths(dir: Path, base_offset: int, suffix: str = "") -> tuple[Path, Path, Path]:
    """(log, offset index, time index) paths; `suffix` marks a cleaner's `.cleaned`/`.swap`."""
    stem = file_stem(base_offset)
    return (
        dir / f"{stem}{LOG_SUFFIX}{suffix}",
        dir / f"{stem}{INDEX_SUFFIX}{suffix}",
        dir / f"{stem}{TIME_INDEX_SUFFIX}{suffix}",
    )


def header_index_path(dir: Path, base_offset: int) -> Path:
    return dir / f"{file_stem(base_offset)}{HEADER_INDEX_SUFFIX}"


def scan_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in the file between `start` and `end`.

    Reads in chunks growing from 16 KiB (lookups usually stop early) to SCAN_CHUNK (long
    scans); stops at a partial or malformed batch. No CRC check: for files already
    validated by recovery.
    """
    pos, chunk = start, FIRST_SCAN_CHUNK
    while pos + HEADER_SIZE <= end:
        buf = os.pread(fd, min(chunk, end - pos), pos)
        chunk = min(chunk * 4, SCAN_CHUNK)
        off = 0
        while off + HEADER_SIZE <= len(buf):
            header = parse_header(buf, off)
            if header.batch_length < MIN_BATCH_LENGTH or pos + off + header.size > end:
                return
            yield pos + off, header
            off += header.size
        if off == 0:
            return
        pos += off


def _write_fully(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


@dataclass(eq=False)
class LogSegment:
    dir: Path
    base_offset: int
    file: CachedFile
    offset_index: OffsetIndex
    time_index: TimeIndex
    index_interval_bytes: int
    size: int
    next_offset: int
    created_ms: int
    needs_recovery: bool = False  # an index was missing or failed its sanity check
    suffix: str = ""  # "" for a live segment; ".cleaned" or ".swap" while the cleaner swaps
    bytes_since_last_index_entry: int = 0
    # (largest timestamp, last offset of the first batch holding it); None until loaded
    _max_timestamp: tuple[int, int] | None = None
    _rolling_timestamp: int | None = None  # max timestamp of the first append, for segment.ms
    closed: bool = False

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> LogSegment:
        """Open (or create) a segment. Sets `needs_recovery` if an index must be rebuilt."""
        log_path, index_path, time_index_path = segment_paths(dir, base_offset, suffix)
        existed = log_path.exists()
        file = CachedFile(log_path, os.O_RDWR | os.O_CREAT)
        size = os.fstat(file.fd).st_size
        missing_index = (
            existed and size > 0 and not (index_path.exists() and time_index_path.exists())
        )
        offset_index, corrupt = _open_index(OffsetIndex, index_path, base_offset, max_index_bytes)
        time_index, corrupt_time = _open_index(
            TimeIndex, time_index_path, base_offset, max_index_bytes
        )
        segment = cls(
            dir,
            base_offset,
            file,
            offset_index,
            time_index,
            index_interval_bytes,
            size,
            base_offset,
            now_ms,
            suffix=suffix,
        )
        segment.needs_recovery = missing_index or corrupt or corrupt_time
        if not segment.needs_recovery:
            segment.needs_recovery = not segment._sanity_check()
        if size == 0:
            segment._max_timestamp = (NO_TIMESTAMP, -1)
        elif not segment.needs_recovery:
            segment.next_offset = segment._read_next_offset()
        return segment

    def _sanity_check(self) -> bool:
        try:
            self.offset_index.sanity_check(self.size)
            self.time_index.sanity_check()
        except CorruptIndexError as exc:
            log.warning("%s; rebuilding the indexes", exc)
            return False
        return True

    @property
    def fd(self) -> int:
        """The log file's descriptor, reopened if the file cache closed it (see file_cache)."""
        return self.file.fd

    def close(self) -> None:
        """Leave the final max-timestamp entry in the time index (as Kafka) and close fds."""
        if self.closed:
            return
        self.on_become_inactive()
        self.close_files()

    def close_files(self) -> None:
        self.closed = True
        self.offset_index.close()
        self.time_index.close()
        self.file.close()

    def delete(self) -> None:
        self.close_files()
        if not self.suffix:
            self.drop_header_index()
        for path in segment_paths(self.dir, self.base_offset, self.suffix):
            path.unlink(missing_ok=True)

    def drop_header_index(self) -> None:
        """Remove the live segment's header index file (its content changes or it goes)."""
        header_index_path(self.dir, self.base_offset).unlink(missing_ok=True)

    def change_suffix(self, suffix: str) -> None:
        """Rename the files (open fds stay valid): indexes first, the log last, so a `.log`
        with the new suffix implies its indexes have it too (the swap protocol relies on it).
        A header index goes first: one under the live name is of the segment leaving it (to
        `.deleted`) or of an older one (a cleaned `.swap` taking the name).
        """
        if not self.suffix or not suffix:
            self.drop_header_index()
        old = segment_paths(self.dir, self.base_offset, self.suffix)
        new = segment_paths(self.dir, self.base_offset, suffix)
        for source, target in zip(old[::-1], new[::-1], strict=True):
            os.replace(source, target)
        self.file.path = new[0]
        self.offset_index.rename(new[1])
        self.time_index.rename(new[2])
        self.suffix = suffix

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def on_become_inactive(self) -> None:
        """Record the segment's max timestamp so a later open finds it in the time index."""
        timestamp, offset = self.max_timestamp_and_offset
        if timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(timestamp, offset, skip_full_check=True)

    # ---- append ----------------------------------------------------------------------------

    def append(self, records: bytes | bytearray, headers: list[BatchHeader]) -> None:
        """Write batches whose offsets are already assigned; index them like Kafka's append."""
        position = self.size
        largest_ts, offset_of_largest = _largest_timestamp(headers)
        if position == 0:
            self._rolling_timestamp = largest_ts
        try:
            _write_fully(self.fd, records, position)
        except OSError:
            os.ftruncate(self.fd, position)  # all or nothing; if this fails, recovery cuts it
            raise
        self.size += len(records)
        last_offset = headers[-1].last_offset
        self.next_offset = last_offset + 1
        if largest_ts > self.max_timestamp_and_offset[0]:
            self._max_timestamp = (largest_ts, offset_of_largest)
        if self.bytes_since_last_index_entry > self.index_interval_bytes and self._index(
            last_offset, position
        ):
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(records)

    def _index(self, last_offset: int, position: int) -> bool:
        """Index the batch just written; False when a full disk refuses the entry. The batch is
        in the log by then, so the append must not fail: a producer told it failed would retry
        it, and the retry would be written twice. The indexes are sparse (a missing entry costs
        a longer scan; the next append tries again) and recovery rebuilds them."""
        try:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(*self.max_timestamp_and_offset)
        except OSError:
            return False
        return True

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's timeWaitedForRoll: age by record time if the segment has a timestamp."""
        if self._rolling_timestamp is None and self.size > 0:
            self._rolling_timestamp = parse_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        if self._rolling_timestamp is not None and self._rolling_timestamp >= 0:
            return message_timestamp - self._rolling_timestamp
        return now_ms - self.created_ms

    # ---- read ------------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> bytes:
        """Whole batches from the one holding `start_offset`, none with base >= max_offset.

        At most `max_bytes`, except that with `min_one_batch` a first batch larger than
        `max_bytes` is returned whole (KIP-74). One pread in the common case.
        """
        floor = self.offset_index.lookup(start_offset)
        if floor >= self.size:
            return b""
        window = _Window(self.fd, floor, self.size)
        window.ensure(
            floor,
            min(self.size - floor, max(max_bytes, 0) + self.index_interval_bytes + READ_SLACK),
        )
        first = self._find_batch_start(window, floor, start_offset)
        if first is None:
            return b""
        end = first
        while end + LOG_OVERHEAD <= self.size:
            window.ensure(end, LOG_OVERHEAD)
            base, size = _BASE_AND_LENGTH.unpack_from(window.buf, end - window.start)
            size += LOG_OVERHEAD
            if base >= max_offset or end + size > self.size:
                break
            if end + size - first > max_bytes and not (end == first and min_one_batch):
                break
            end += size
        if end == first:
            return b""
        window.ensure(first, end - first)
        return window.slice(first, end)

    def _find_batch_start(self, window: _Window, pos: int, offset: int) -> int | None:
        """Position of the first batch whose last offset >= `offset`."""
        while pos + HEADER_SIZE <= self.size:
            window.ensure(pos, HEADER_SIZE)
            rel = pos - window.start
            base, size = _BASE_AND_LENGTH.unpack_from(window.buf, rel)
            last = base + _I32.unpack_from(window.buf, rel + LAST_OFFSET_DELTA_OFFSET)[0]
            if last >= offset:
                return pos
            pos += size + LOG_OVERHEAD
        return None

    def _first_batch_reaching(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`: headers
        only, from the offset index's floor."""
        for position, header in scan_headers(self.fd, self.offset_index.lookup(offset), self.size):
            if header.last_offset >= offset:
                return position, header
        return None

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the batch holding `offset`, if this segment has it."""
        found = self._first_batch_reaching(offset)
        return found if found is not None and found[1].base_offset <= offset else None

    def batch_position(self, offset: int) -> int:
        """Position of the batch holding `offset` (of the first one after it), or the size
        when no batch here reaches it."""
        found = self._first_batch_reaching(offset)
        return self.size if found is None else found[0]

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self.fd, header.size, position)

    # ---- timestamps ------------------------------------------------------------------------

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest timestamp, last offset of its batch).

        Loaded lazily from the time index's last entry, as Kafka does: roll, close and
        recovery all leave the segment's max timestamp there.
        """
        if self._max_timestamp is None:
            timestamp, offset = self.time_index.last_entry
            self._max_timestamp = (timestamp, offset) if timestamp != NO_TIMESTAMP else (-1, -1)
        return self._max_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    def largest_timestamp(self) -> int:
        """Kafka's largestTimestamp: max record timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def _read_largest_timestamp(self) -> tuple[int, int]:
        """Last time index entry, then scan the batches after it for anything larger."""
        best = self.time_index.last_entry
        start = self.offset_index.lookup(best[1])
        for _, header in scan_headers(self.fd, start, self.size):
            if header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.last_offset)
        return best if best[0] != NO_TIMESTAMP else (NO_TIMESTAMP, -1)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= target."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for position, header in scan_headers(self.fd, start, self.size):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for offset, ts in record_timestamps(self.read_batch(position, header)):
                if ts >= timestamp and offset >= starting_offset:
                    return offset, ts, max(header.partition_leader_epoch, -1)
        return None

    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the first record holding the segment's max timestamp."""
        timestamp, offset = self.max_timestamp_and_offset
        if self.size == 0:
            return None
        for position, header in scan_headers(self.fd, self.offset_index.lookup(offset), self.size):
            if header.max_timestamp == timestamp:
                for record_offset, ts in record_timestamps(self.read_batch(position, header)):
                    if ts == timestamp:
                        return record_offset, ts, max(header.partition_leader_epoch, -1)
        return None

    # ---- recovery and truncation -----------------------------------------------------------

    def recover(
        self,
        max_batch_bytes: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
        from_offset: int | None = None,
    ) -> int:
        """Validate batches, rebuild both indexes, cut at the first bad one.

        Scans the whole segment, or with `from_offset` (a recovery point: everything below
        it was fsynced with its indexes) only from the index entry at or below it, keeping
        the index entries before. Returns the number of bytes truncated; `on_batch` sees
        each valid header scanned.
        """
        start = 0
        if from_offset is not None and not self.needs_recovery:
            start = self._resume_position(from_offset)
        if start == 0:
            self.offset_index.reset()
            self.time_index.reset()
            self._max_timestamp = (NO_TIMESTAMP, -1)
        self._rolling_timestamp = None
        file_size = os.fstat(self.fd).st_size
        reader = _Window(self.fd, start, file_size)
        valid = last_index_position = start
        next_offset = self.base_offset
        while True:
            header = self._valid_batch_at(reader, valid, file_size, max_batch_bytes, next_offset)
            if header is None:
                break
            if header.max_timestamp > self._max_timestamp[0]:
                self._max_timestamp = (header.max_timestamp, header.last_offset)
            if valid - last_index_position > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, valid)
                self.time_index.maybe_append(*self._max_timestamp)
                last_index_position = valid
            if on_batch is not None:
                on_batch(header)
            valid += header.size
            next_offset = header.next_offset
        if valid == start and start > 0:
            self.needs_recovery = True  # the trusted prefix is damaged: start over
            return self.recover(max_batch_bytes, on_batch)
        self.size, self.next_offset = valid, next_offset
        self.bytes_since_last_index_entry = valid - last_index_position
        self.needs_recovery = False
        # As a normally closed segment, end the time index with the max timestamp (Kafka too).
        self.time_index.maybe_append(*self._max_timestamp, skip_full_check=True)
        if valid < file_size:
            os.ftruncate(self.fd, valid)
        return file_size - valid

    def _resume_position(self, offset: int) -> int:
        """Keep the index entries up to the one at or below `offset`; return its position.

        The time index entries with offsets up to that entry's offset hold the exact max
        timestamp of everything before the position, so the scan can continue from there.
        """
        indexed_offset, position = self.offset_index.lookup_entry(offset)
        if position == 0:
            return 0
        self.offset_index.truncate_to(indexed_offset + 1)
        self.time_index.truncate_to(indexed_offset + 1)
        timestamp, max_offset = self.time_index.last_entry
        self._max_timestamp = (timestamp, max_offset) if timestamp != NO_TIMESTAMP else (-1, -1)
        return position

    def _valid_batch_at(
        self, reader: _Window, pos: int, file_size: int, max_batch_bytes: int, expected: int
    ) -> BatchHeader | None:
        if pos + HEADER_SIZE > file_size:
            if pos < file_size:
                log.warning("%s: partial batch header at byte %d", self._name, pos)
            return None
        reader.ensure(pos, HEADER_SIZE, RECOVER_CHUNK)
        header = parse_header(reader.buf, pos - reader.start)
        problem = None
        if header.magic != 2:
            problem = f"magic {header.magic}"
        elif header.batch_length < MIN_BATCH_LENGTH or header.size > max_batch_bytes:
            problem = f"batch length {header.batch_length}"
        elif pos + header.size > file_size:
            problem = "partial batch"
        elif header.base_offset < expected or not self.can_hold_offset(header.last_offset):
            problem = f"offset {header.base_offset} out of order (expected >= {expected})"
        elif header.last_offset_delta < 0:
            problem = f"last offset delta {header.last_offset_delta}"
        else:
            reader.ensure(pos, header.size, RECOVER_CHUNK)
            rel = pos - reader.start
            if compute_crc(memoryview(reader.buf)[rel : rel + header.size]) != header.crc:
                problem = "CRC mismatch"
        if problem:
            log.warning("%s: invalid batch at byte %d: %s", self._name, pos, problem)
            return None
        return header

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop the batch holding `offset` and everything after; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            position = next(
                (pos for pos, h in scan_headers(self.fd, 0, self.size) if h.base_offset >= offset),
                self.size,
            )
        else:
            position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - position
        if removed:
            self.drop_header_index()
            os.ftruncate(self.fd, position)
            self.size = position
        self.next_offset = self._read_next_offset()
        self.bytes_since_last_index_entry = 0
        self._max_timestamp = self._read_largest_timestamp()
        if self.size == 0:
            self.created_ms, self._rolling_timestamp = now_ms, None
        return removed

    def _read_next_offset(self) -> int:
        next_offset = self.base_offset
        start = self.offset_index.lookup(self.offset_index.last_offset)
        for _, header in scan_headers(self.fd, start, self.size):
            next_offset = header.next_offset
        return next_offset

    @property
    def _name(self) -> str:
        return str(segment_paths(self.dir, self.base_offset, self.suffix)[0])


def _open_index(kind: type, path: Path, base_offset: int, max_index_bytes: int) -> tuple:
    """Open an index; a corrupt file is replaced by an empty one to rebuild. -> (index, corrupt)"""
    try:
        return kind.open(path, base_offset, max_index_bytes), False
    except CorruptIndexError as exc:
        log.warning("%s; rebuilding it", exc)
        path.unlink(missing_ok=True)
        return kind.open(path, base_offset, max_index_bytes), True


def _largest_timestamp(headers: list[BatchHeader]) -> tuple[int, int]:
    """(max timestamp, last offset of the first batch holding it) of an append."""
    best = (NO_TIMESTAMP, -1)
    for header in headers:
        if header.max_timestamp > best[0]:
            best = (header.max_timestamp, header.last_offset)
    if best[1] < 0:
        best = (best[0], headers[-1].last_offset)
    return best


@dataclass(eq=False)
class _Window:
    """A pread buffer over part of a file; grows (rarely) when a batch runs past it."""

    fd: int
    start: int
    limit: int
    buf: bytes = b""

    def ensure(self, position: int, length: int, chunk: int = 0) -> None:
        """Make [position, position + length) available, reading `chunk` bytes when refilling."""
        end = position + length
        if position >= self.start and end <= self.start + len(self.buf):
            return
        if position >= self.start and position <= self.start + len(self.buf) and not chunk:
            have = self.start + len(self.buf)
            self.buf += os.pread(self.fd, end - have, have)
            return
        want = min(max(length, chunk), self.limit - position)
        self.start, self.buf = position, os.pread(self.fd, want, position)

    def slice(self, start: int, end: int) -> bytes:
        rel_start, rel_end = start - self.start, end - self.start
        if rel_start == 0 and rel_end == len(self.buf):
            return self.buf
        return self.buf[rel_start:rel_end]
