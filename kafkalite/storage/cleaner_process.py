"""The cleaner's CPU work in a process of its own, so it never holds the broker's GIL.

The loop plans a cleaning (cleaner.find_cleanable) and describes it as a `CleanJob`: paths,
offsets, sizes and config numbers only. `clean_in_worker` runs in a worker process: it
builds the offset map and writes one `<base>.log.cleaned` (+ indexes, flushed) per group of
segments, reading only bytes the loop said exist below the active segment's end, and
answers which groups it wrote. The broker then swaps them in as the thread cleaner does
(`UnifiedLog.replace_segments_from_worker`: `.cleaned` -> `.swap` -> final names), so a
worker that dies leaves at most `.cleaned` files, which are never part of the log.

`CleanerPool` keeps one long-lived worker, started on first use with the 'forkserver'
context (forking a process that runs trio's threads is unsafe), at a lower CPU priority.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage.batch import parse_header
from kafkalite.storage.cleaned_txns import CleanedTransactions
from kafkalite.storage.cleaner import OffsetMap, filter_batch, map_batch, segment_batches
from kafkalite.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from kafkalite.storage.segment import CLEANED_SUFFIX, INT32_MAX, LogSegment, segment_paths
from kafkalite.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkalite.storage.txn_index import AbortedTxn


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One existing segment as the loop saw it (segments below the active one never change)."""

    base_offset: int
    size: int  # bytes to read: for the active segment, its size when the job was planned
    next_offset: int
    map_position: int  # where mapping starts (offset index lookup of the first dirty offset)
    index_entries: int
    time_index_entries: int
    largest_timestamp: int


@dataclass(frozen=True, slots=True)
class CleanJob:
    dir: str
    sources: list[SegmentInfo]  # the cleanable segments, in order
    mapped: list[SegmentInfo]  # the segments holding [first_dirty_offset, map_end_offset)
    first_dirty_offset: int
    map_end_offset: int
    now_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    max_message_bytes: int
    delete_retention_ms: int
    last_sequences: dict[int, int] = field(default_factory=dict)  # producer id -> last seq
    aborted_txns: list[AbortedTxn] = field(default_factory=list)  # the log's aborted index


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    first: int  # index into CleanJob.sources
    count: int
    written: bool  # False: one segment with nothing to drop, left as it is
    txn_index: list[AbortedTxn] = field(default_factory=list)  # the cleaned segment's


@dataclass(frozen=True, slots=True)
class WorkerResult:
    groups: list[CleanedGroup]
    pid: int  # the process that cleaned


@dataclass(slots=True)
class _Source:
    """A read-only view of a segment file for `segment_batches`."""

    dir: Path
    base_offset: int
    size: int
    fd: int


def _keep_going() -> None:
    pass


def clean_in_worker(job: CleanJob, pause: Callable[[], None] = _keep_going) -> WorkerResult:
    """Build the offset map and write the `.cleaned` segments of every group."""
    directory = Path(job.dir)
    offset_map = _build_offset_map(directory, job, pause)
    start, end = job.sources[0].base_offset, job.sources[-1].next_offset
    txns = CleanedTransactions.over(job.aborted_txns, start, end)
    groups: list[CleanedGroup] = []
    first = 0
    while first < len(job.sources):
        group = _clean_group(directory, job, first, offset_map, pause, txns)
        groups.append(group)
        first += group.count
    return WorkerResult(groups, os.getpid())


def _open_source(directory: Path, info: SegmentInfo) -> _Source:
    fd = os.open(segment_paths(directory, info.base_offset)[0], os.O_RDONLY)
    return _Source(directory, info.base_offset, info.size, fd)


def _build_offset_map(directory: Path, job: CleanJob, pause: Callable[[], None]) -> OffsetMap:
    """cleaner.build_offset_map over the files: key -> latest offset in the mapped range."""
    start, end = job.first_dirty_offset, job.map_end_offset
    offsets: OffsetMap = {}
    txns = CleanedTransactions.over(job.aborted_txns, start, end)
    for info in job.mapped:
        source = _open_source(directory, info)
        try:
            for header, batch in segment_batches(source, info.map_position):
                pause()
                if header.base_offset >= end:
                    break
                if header.last_offset < start:
                    continue
                map_batch(offsets, header, batch, start, end, txns)
        finally:
            os.close(source.fd)
    return offsets


def _clean_group(
    directory: Path,
    job: CleanJob,
    first: int,
    offset_map: OffsetMap,
    pause: Callable[[], None],
    txns: CleanedTransactions,
) -> CleanedGroup:
    """cleaner._clean_group without the swap: leaves a flushed `.cleaned` segment."""
    base = job.sources[first].base_offset
    for path in segment_paths(directory, base, CLEANED_SUFFIX):
        path.unlink(missing_ok=True)
    new = LogSegment.open(
        directory,
        base,
        index_interval_bytes=job.index_interval_bytes,
        max_index_bytes=job.segment_index_bytes,
        now_ms=job.now_ms,
        suffix=CLEANED_SUFFIX,
    )
    count = 0
    try:
        changed = False
        mtime_ns = 0
        for info in job.sources[first:]:
            if count and not _fits(new, info, job):
                break
            source = _open_source(directory, info)
            try:
                changed |= _copy_retained(source, info, new, offset_map, job, pause, txns)
                mtime_ns = max(mtime_ns, os.fstat(source.fd).st_mtime_ns)
            finally:
                os.close(source.fd)
            count += 1
        kept_txns = txns.take_index()
        if not changed and count == 1:
            new.delete()
            return CleanedGroup(first, 1, written=False)
        new.on_become_inactive()
        new.flush()
        os.utime(new.fd, ns=(mtime_ns, mtime_ns))  # the newest source's: see cleaner.py
        new.close_files()
    except BaseException:
        new.delete()
        raise
    return CleanedGroup(first, count, written=True, txn_index=kept_txns)


def _fits(new: LogSegment, info: SegmentInfo, job: CleanJob) -> bool:
    index_bytes = (len(new.offset_index) + info.index_entries) * OFFSET_ENTRY_SIZE
    time_bytes = (len(new.time_index) + info.time_index_entries) * TIME_ENTRY_SIZE
    return (
        new.size + info.size <= job.segment_bytes
        and index_bytes <= job.segment_index_bytes
        and time_bytes <= job.segment_index_bytes
        and info.next_offset - 1 - new.base_offset <= INT32_MAX
    )


def _copy_retained(
    source: _Source,
    info: SegmentInfo,
    dest: LogSegment,
    offset_map: OffsetMap,
    job: CleanJob,
    pause: Callable[[], None],
    txns: CleanedTransactions,
) -> bool:
    retain_deletes = info.largest_timestamp > job.now_ms - job.delete_retention_ms
    changed = False
    for header, batch in segment_batches(source):
        pause()
        out = filter_batch(
            header,
            batch,
            offset_map,
            retain_deletes,
            job.last_sequences.get,
            job.max_message_bytes,
            txns,
        )
        changed |= out is not batch
        if out is not None:
            dest.append(out, [parse_header(out)])
    return changed


Work = Callable[[CleanJob], WorkerResult]
CLEANER_NICENESS = 10


def _lower_priority() -> None:
    """Cleaning is background work: on a busy machine the broker's own threads (and its
    clients) get the CPU first."""
    try:
        os.nice(CLEANER_NICENESS)
    except OSError:
        pass


class CleanerPool:
    """One long-lived cleaner process, started on first use, stopped with the broker."""

    def __init__(self) -> None:
        self._executor: ProcessPoolExecutor | None = None

    def submit(self, work: Work, job: CleanJob) -> Future[WorkerResult]:
        """May block while the process starts: call it from a worker thread."""
        if self._executor is None:
            context = multiprocessing.get_context("forkserver")
            # Not the default '__main__' (the whole broker): a smaller burst of CPU at start.
            context.set_forkserver_preload([__name__])
            self._executor = ProcessPoolExecutor(1, mp_context=context, initializer=_lower_priority)
        return self._executor.submit(work, job)

    def worker_pids(self) -> list[int]:
        processes = getattr(self._executor, "_processes", None) or {}
        return [process.pid for process in processes.values()]

    def shutdown(self) -> None:
        """Stop the worker now: an unfinished cleaning leaves only `.cleaned` files."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        # ProcessPoolExecutor has no public way to stop a running task.
        for process in list((getattr(executor, "_processes", None) or {}).values()):
            process.kill()
        executor.shutdown(wait=True, cancel_futures=True)


CLEANER_POOL = CleanerPool()
