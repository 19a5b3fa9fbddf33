"""A delay store's due-time index (broker/delayed_delivery_store.py): which held records are
due when, on disk, so that memory does not grow with the number of held records (RocketMQ's
timer wheel, Kafka's indexes).

Entries are fixed-width (due ms, store offset, offset of the batch's dues record), appended
to one file per time bucket of BUCKET_MS (`delayed/due-index/<bucket>.due`). Only the
buckets up to HORIZON_MS ahead of now are in memory (a heap in due order); the horizon
advances with the clock, LOAD_BUDGET entries a step at most. Of the others only a summary
per bucket is kept (live entries, earliest due, lowest dues offset). A released record's
entry is overwritten in place with a tombstone (due -1); a bucket file with no live entry
left is deleted with the next checkpoint, so the files go as the store's log start moves
past released records.

The index is derived from the store, like Kafka's offset and time indexes, with a recovery
point: a checkpoint (the store's log end X, the bucket summaries, the held records of open
transactions, a CRC) is taken between release steps every so often and by a clean close,
and written once the files written before it are fsynced (a few per step). An open cuts the
files back to the checkpoint (entries appended after it, files created after it) and indexes
the store from X on (`Rebuild`: held batches added, released records tombstoned, in the
buckets due by then); without a usable checkpoint (none, torn, a torn file, X below the
store's log start) it indexes the whole store. Sans-IO apart from its own files.
"""

from __future__ import annotations

import bisect
import heapq
import os
import shutil
import struct
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkalite.storage.durable_files import fsync_dir, write_atomically

INDEX_DIR = "due-index"
SUFFIX = ".due"
CHECKPOINT = "checkpoint"
BUCKET_MS = 60_000
HORIZON_MS = 60_000  # buckets starting within this of now are in memory
TOMBSTONE = -1
_TOMBSTONE = struct.pack(">q", TOMBSTONE)
ENTRY = struct.Struct(">qqq")  # due ms, store offset, dues offset
_SUMMARY = struct.Struct(">qqqqq")  # bucket, live entries, slots, min due, min dues offset
_HEAD = struct.Struct(">iqii")  # version, store log end, buckets, open transactions
_TXN = struct.Struct(">qi")  # producer id, entries
_CRC = struct.Struct(">I")
_VERSION = 1
MAX_OPEN_FILES = 64
_SORT_CHUNK = 100_000  # released offsets sorted at a time by a rebuild
LOAD_BUDGET = 50_000  # entries read into memory per step of the horizon (about 30 ms)
_NONE = 2**63 - 1

Entry = tuple[int, int, int]  # due ms, store offset, dues offset


def bucket_of(due_ms: int) -> int:
    return due_ms // BUCKET_MS


@dataclass(eq=False)
class Bucket:
    """The summary of one bucket file (kept in memory for every bucket, and checkpointed)."""

    live: int = 0  # entries not released
    slots: int = 0  # entries in the file (the next one's slot)
    min_due: int = _NONE  # of its entries ever (a lower bound once some are released)
    min_dues_offset: int = _NONE

    def note(self, due: int, dues_offset: int) -> None:
        self.live += 1
        self.slots += 1
        self.min_due = min(self.min_due, due)
        self.min_dues_offset = min(self.min_dues_offset, dues_offset)


@dataclass(eq=False)
class Checkpoint:
    """The index as of the store's `log_end` (file `due-index/checkpoint`)."""

    log_end: int
    buckets: dict[int, Bucket]
    open_txns: dict[int, list[Entry]]

    def encode(self) -> bytes:
        parts = [_HEAD.pack(_VERSION, self.log_end, len(self.buckets), len(self.open_txns))]
        for number, b in self.buckets.items():
            parts.append(_SUMMARY.pack(number, b.live, b.slots, b.min_due, b.min_dues_offset))
        for producer_id, entries in self.open_txns.items():
            parts.append(_TXN.pack(producer_id, len(entries)))
            parts.extend(ENTRY.pack(*entry) for entry in entries)
        data = b"".join(parts)
        return data + _CRC.pack(zlib.crc32(data))

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint | None:
        """None when torn or of another version."""
        if len(data) < _HEAD.size + _CRC.size:
            return None
        body, (crc,) = data[: -_CRC.size], _CRC.unpack(data[-_CRC.size :])
        if zlib.crc32(body) != crc:
            return None
        version, log_end, bucket_count, txn_count = _HEAD.unpack_from(body)
        if version != _VERSION:
            return None
        position = _HEAD.size
        buckets: dict[int, Bucket] = {}
        for _ in range(bucket_count):
            number, *summary = _SUMMARY.unpack_from(body, position)
            buckets[number] = Bucket(*summary)
            position += _SUMMARY.size
        open_txns: dict[int, list[Entry]] = {}
        for _ in range(txn_count):
            producer_id, count = _TXN.unpack_from(body, position)
            position += _TXN.size
            end = position + count * ENTRY.size
            open_txns[producer_id] = [e for e in ENTRY.iter_unpack(body[position:end])]
            position = end
        return cls(log_end, buckets, open_txns)


@dataclass(eq=False)
class _Loading:
    """A bucket being read into memory: slots next..end-1 still to read (later ones were
    added in memory)."""

    number: int
    next: int
    end: int


@dataclass(eq=False)
class _Files:
    """Open bucket files, the least recently used closed beyond MAX_OPEN_FILES."""

    dir: Path
    fds: OrderedDict[int, int] = field(default_factory=OrderedDict)
    dirty: set[int] = field(default_factory=set)  # written since the last fsync

    def path(self, number: int) -> Path:
        return self.dir / f"{number}{SUFFIX}"

    def write(self, number: int, data: bytes, position: int) -> None:
        fd = self.fds.pop(number, None)
        if fd is None:
            fd = os.open(self.path(number), os.O_RDWR | os.O_CREAT, 0o644)
            while len(self.fds) >= MAX_OPEN_FILES:
                self._close(*self.fds.popitem(last=False))
        self.fds[number] = fd
        os.pwrite(fd, data, position)
        self.dirty.add(number)

    def read(self, number: int, start: int, end: int) -> bytes:
        with open(self.path(number), "rb") as file:
            file.seek(start)
            return file.read(end - start)

    def _close(self, number: int, fd: int) -> None:
        os.close(fd)  # (still dirty: synced by the next flush)

    def delete(self, number: int) -> None:
        fd = self.fds.pop(number, None)
        if fd is not None:
            os.close(fd)
        self.dirty.discard(number)
        self.path(number).unlink(missing_ok=True)

    def sync(self, number: int) -> None:
        """fsync one file (gone: nothing to do)."""
        fd = self.fds.get(number)
        if fd is not None:
            os.fsync(fd)
            return
        try:
            fd = os.open(self.path(number), os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.popitem(last=False)[1])


@dataclass(eq=False)
class DueIndex:
    """One delay store's index: its bucket files, and in memory the horizon's entries."""

    dir: Path
    buckets: dict[int, Bucket] = field(default_factory=dict)
    loaded_until: int = 0  # buckets below this number are in memory
    # Loaded entries: store offset -> (due ms, bucket, slot in its file).
    live: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    heap: list[tuple[int, int]] = field(default_factory=list)  # (due, offset), stale ones lazily
    # (dues offset, offset) of loaded entries: where the store must keep its records from
    lows: list[tuple[int, int]] = field(default_factory=list)
    unloaded: list[int] = field(default_factory=list)  # bucket numbers, ascending
    held: int = 0  # live entries, loaded or not
    loading: _Loading | None = None  # the bucket partly in memory
    emptied: set[int] = field(default_factory=set)  # buckets whose entries were all released
    pending: _Pending | None = None  # a checkpoint waiting for its files to be synced
    _unloaded_low: int | None = None  # lowest dues offset not in memory (None: to be computed)
    files: _Files = field(init=False)

    def __post_init__(self) -> None:
        self.files = _Files(self.dir)

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open_checkpointed(
        cls, store_dir: Path, log_start: int, log_end: int
    ) -> tuple[DueIndex, Checkpoint] | None:
        """The index as of its last checkpoint, if it is whole and within the store's
        offsets: entries added since are cut off and files created since deleted (the store
        from the checkpoint's log end on is to be indexed again: `Rebuild`)."""
        directory = store_dir / INDEX_DIR
        try:
            checkpoint = Checkpoint.decode((directory / CHECKPOINT).read_bytes())
        except OSError:
            return None
        if checkpoint is None or not log_start <= checkpoint.log_end <= log_end:
            return None
        buckets = checkpoint.buckets
        sizes = {n: _size(directory / f"{n}{SUFFIX}") for n in buckets}
        if any(sizes[n] < b.slots * ENTRY.size for n, b in buckets.items()):
            return None  # a torn or missing file
        named = {CHECKPOINT, *(f"{n}{SUFFIX}" for n in buckets)}
        for path in directory.iterdir():
            if path.name not in named:  # created after it (or a leftover .tmp)
                path.unlink()
        for n, b in buckets.items():
            if sizes[n] > b.slots * ENTRY.size:
                os.truncate(directory / f"{n}{SUFFIX}", b.slots * ENTRY.size)
        index = cls(directory, dict(buckets), loaded_until=-(2**62))
        index.unloaded = sorted(buckets)
        index.held = sum(b.live for b in buckets.values())
        return index, checkpoint

    @classmethod
    def create(cls, store_dir: Path) -> DueIndex:
        """An empty index (any old files removed), nothing loaded until `advance`."""
        directory = store_dir / INDEX_DIR
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        return cls(directory, loaded_until=-(2**62))

    # -- entries ----------------------------------------------------------------------------

    def add(self, entries: Iterable[Entry]) -> None:
        """Index held records (their files are written, not fsynced: a crash rebuilds)."""
        by_bucket: dict[int, list[Entry]] = {}
        for entry in entries:
            by_bucket.setdefault(bucket_of(entry[0]), []).append(entry)
        for number, group in by_bucket.items():
            bucket = self.buckets.get(number)
            if bucket is None:
                bucket = self.buckets[number] = Bucket()
                if number >= self.loaded_until:
                    bisect.insort(self.unloaded, number)
                    self._unloaded_low = None
            slot = bucket.slots
            self.files.write(number, b"".join(ENTRY.pack(*e) for e in group), slot * ENTRY.size)
            for due, offset, dues_offset in group:
                bucket.note(due, dues_offset)
                if number < self.loaded_until:
                    self._load_entry(due, offset, dues_offset, number, slot)
                elif self._unloaded_low is not None:
                    self._unloaded_low = min(self._unloaded_low, dues_offset)
                slot += 1
            self.held += len(group)

    def _load_entry(self, due: int, offset: int, dues_offset: int, number: int, slot: int) -> None:
        self.live[offset] = (due, number, slot)
        heapq.heappush(self.heap, (due, offset))
        heapq.heappush(self.lows, (dues_offset, offset))

    def remove(self, offset: int) -> bool:
        """The record was released or dropped: its entry gets a tombstone."""
        found = self.live.pop(offset, None)
        if found is None:
            return False
        _, number, slot = found
        bucket = self.buckets[number]
        bucket.live -= 1
        self.held -= 1
        self.files.write(number, _TOMBSTONE, slot * ENTRY.size)
        if bucket.live == 0:  # its file goes with the next checkpoint
            self.emptied.add(number)
        return True

    def restore(self, entries: Sequence[tuple[int, int]]) -> None:
        """Taken (due, offset) entries not released after all: due again."""
        for due, offset in entries:
            if offset in self.live:
                heapq.heappush(self.heap, (due, offset))

    # -- the horizon ------------------------------------------------------------------------

    def advance(self, now_ms: int, budget: int = LOAD_BUDGET) -> int:
        """Load the buckets starting within HORIZON_MS of now, in bucket order, at most
        `budget` entries a call (the rest at the next: the horizon is ahead of the dues);
        returns the entries read."""
        target = bucket_of(now_ms + HORIZON_MS) + 1
        read = 0
        while read < budget:
            if self.loading is None:
                if not self.unloaded or self.unloaded[0] >= target:
                    self.loaded_until = max(self.loaded_until, target)
                    break
                number = self.unloaded.pop(0)
                self.loading = _Loading(number, 0, self.buckets[number].slots)
                self.loaded_until = number + 1  # what comes for it from now on: in memory
            read += self._load_chunk(self.loading, budget - read)
        return read

    def _load_chunk(self, loading: _Loading, count: int) -> int:
        """Read up to `count` entries of the bucket being loaded into memory."""
        end = min(loading.end, loading.next + count)
        data = self.files.read(loading.number, loading.next * ENTRY.size, end * ENTRY.size)
        for slot, (due, offset, dues_offset) in enumerate(ENTRY.iter_unpack(data), loading.next):
            if due != TOMBSTONE:
                self._load_entry(due, offset, dues_offset, loading.number, slot)
        read = max(end - loading.next, 1)
        loading.next = end
        if end >= loading.end:
            self.loading = None
            self._unloaded_low = None
        return read

    def _drop_stale_top(self) -> None:
        """Pop heap entries released meanwhile (or pushed again by a restore)."""
        heap, live = self.heap, self.live
        while heap:
            found = live.get(heap[0][1])
            if found is not None and found[0] == heap[0][0]:
                return
            heapq.heappop(heap)

    def take_due(self, now_ms: int, max_records: int) -> list[tuple[int, int]]:
        """Up to `max_records` due (due, offset) entries, earliest first."""
        self.advance(now_ms)
        taken: list[tuple[int, int]] = []
        while len(taken) < max_records:
            self._drop_stale_top()
            if not self.heap or self.heap[0][0] > now_ms:
                break
            taken.append(heapq.heappop(self.heap))
        return taken

    @property
    def next_due_ms(self) -> int | None:
        self._drop_stale_top()
        buckets, loading = self.buckets, self.loading
        due = min(
            self.heap[0][0] if self.heap else _NONE,
            buckets[loading.number].min_due if loading is not None else _NONE,
            next((buckets[n].min_due for n in self.unloaded if buckets[n].live), _NONE),
        )
        return None if due == _NONE else due

    def low_dues_offset(self) -> int | None:
        """The lowest dues offset of a live entry: the store keeps its records from there."""
        lows, live = self.lows, self.live
        while lows and lows[0][1] not in live:
            heapq.heappop(lows)
        if len(lows) > 2 * len(live) + 1024:  # released ones behind a long-held one
            lows[:] = [entry for entry in lows if entry[1] in live]
            heapq.heapify(lows)
        if self._unloaded_low is None:
            buckets = self.buckets
            loading = [self.loading.number] if self.loading is not None else []
            self._unloaded_low = min(
                (b.min_dues_offset for n in [*loading, *self.unloaded] if (b := buckets[n]).live),
                default=_NONE,
            )
        low = min(lows[0][0] if lows else _NONE, self._unloaded_low)
        return None if low == _NONE else low

    # -- closing ----------------------------------------------------------------------------

    def begin_checkpoint(self, log_end: int, open_txns: dict[int, list[Entry]]) -> None:
        """Take the index's state as of the store's `log_end` (between two release steps);
        it is recorded once the files written before are synced (`continue_checkpoint`).
        Whatever is written meanwhile is beyond it: cut off or found again by a recovery."""
        unsynced = set(self.files.dirty)
        if self.pending is not None:  # superseded: its files are to be synced still
            unsynced |= set(self.pending.unsynced)
        self.files.dirty.clear()
        loading = self.loading.number if self.loading is not None else None
        emptied = {
            n
            for n in self.emptied
            if n in self.buckets and self.buckets[n].live == 0 and n != loading
        }
        kept = {n: replace(b) for n, b in self.buckets.items() if n not in emptied}
        txns = {producer_id: list(entries) for producer_id, entries in open_txns.items()}
        self.pending = _Pending(Checkpoint(log_end, kept, txns), sorted(unsynced), emptied)

    def continue_checkpoint(self, max_files: int | None = None) -> bool:
        """fsync up to `max_files` of the pending checkpoint's files (None: all), and once
        all are, write it; then the files of the buckets emptied before it go (a crash
        between leaves files no checkpoint names: deleted at the next open). Whether it is
        written."""
        pending = self.pending
        if pending is None:
            return True
        budget = len(pending.unsynced) if max_files is None else max_files
        while pending.unsynced and budget > 0:
            self.files.sync(pending.unsynced.pop())
            budget -= 1
        if pending.unsynced:
            return False
        fsync_dir(self.dir)  # (files created since the last checkpoint)
        write_atomically(self.dir / CHECKPOINT, pending.checkpoint.encode())
        self.pending = None
        for number in pending.emptied:
            bucket = self.buckets.get(number)
            if bucket is None or bucket.live > 0 or self._is_loading(number):
                continue  # (refilled since: a recovery would find its entries again)
            del self.buckets[number]
            self.files.delete(number)
            self.emptied.discard(number)
            if number in self.unloaded:
                self.unloaded.remove(number)
                self._unloaded_low = None
        return True

    def _is_loading(self, number: int) -> bool:
        return self.loading is not None and self.loading.number == number

    def write_checkpoint(self, log_end: int, open_txns: dict[int, list[Entry]]) -> None:
        """Checkpoint now (every file synced: a clean close)."""
        self.begin_checkpoint(log_end, open_txns)
        self.continue_checkpoint()

    def close(self) -> None:
        """Without a checkpoint (the last one stays: the next open indexes from there)."""
        self.files.close()


@dataclass(eq=False)
class _Pending:
    """A checkpoint taken, waiting for its files to be synced."""

    checkpoint: Checkpoint
    unsynced: list[int]
    emptied: set[int]  # buckets empty when it was taken (not in it): deleted once written


@dataclass(eq=False)
class Rebuild:
    """The index rebuilt from a scan of the store (after a crash, or with no valid
    checkpoint): held records are added as their batches are met, released ones are noted
    (8 bytes each, for the scan only) and dropped from the files at the end."""

    index: DueIndex
    released: array[int] = field(default_factory=lambda: array("q"))

    def add(self, entries: Iterable[Entry]) -> None:
        self.index.add(entries)

    def note_released(self, offsets: Iterable[int]) -> None:
        self.released.extend(offsets)

    def forget_released_since(self, mark: int) -> None:
        """The releases noted since `mark` (len of `released` then) did not happen."""
        del self.released[mark:]

    def finish(self, log_start: int, up_to_bucket: int | None = None) -> DueIndex:
        """Give the released records' entries their tombstones (and those below the store's
        log start), in the buckets up to `up_to_bucket` (None: all; records released since
        the checkpoint were due by the time of the store's last record, or by now)."""
        released, self.released = self.released, array("q")
        chunks = [  # sorted a chunk at a time: no list of all of them
            array("q", sorted(released[i : i + _SORT_CHUNK]))
            for i in range(0, len(released), _SORT_CHUNK)
        ]
        del released
        index = self.index
        for number in list(index.buckets):
            if up_to_bucket is None or number <= up_to_bucket:
                self._sweep(number, chunks, log_start)
        index._unloaded_low = None
        return index

    def _sweep(self, number: int, released: list[array[int]], log_start: int) -> None:
        """Tombstones in the bucket's file (read a chunk at a time); its live entries
        counted again."""
        index, old = self.index, self.index.buckets[number]
        bucket = index.buckets[number] = Bucket()
        chunk = LOAD_BUDGET * ENTRY.size
        with open(index.files.path(number), "r+b") as file:
            position = 0
            while data := file.read(chunk):
                for slot, (due, offset, dues_offset) in enumerate(ENTRY.iter_unpack(data)):
                    if due == TOMBSTONE:
                        continue
                    if offset < log_start or _in(released, offset):
                        os.pwrite(file.fileno(), _TOMBSTONE, position + slot * ENTRY.size)
                    else:
                        bucket.note(due, dues_offset)
                position += len(data)
        bucket.slots = old.slots
        index.files.dirty.add(number)
        index.held += bucket.live - old.live
        if bucket.live == 0:
            index.emptied.add(number)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _in(chunks: list[array[int]], value: int) -> bool:
    """Whether `value` is in one of the sorted chunks."""
    for chunk in chunks:
        position = bisect.bisect_left(chunk, value)
        if position < len(chunk) and chunk[position] == value:
            return True
    return False
