"""Periodic log work with the disk-heavy parts on worker threads, off the event loop.

The loop thread keeps every change to a log's state (segment lists, recovery points, offsets);
worker threads (trio.to_thread) do what may block for long: the fsyncs after a roll, unlinking
deleted segments, checkpoint writes and the cleaner's swaps. The cleaner's CPU work (offset
map, rewriting segments) runs in a process of its own (storage/cleaner_process.py) so it
never holds this interpreter's GIL; on a worker thread only where no process can start.
While a log is cleaned its segments are not deleted (`UnifiedLog.cleaning`), appends only
touch the active segment, which the cleaner never rewrites, and the cleaned segments are
swapped in on the loop (Kafka's cleaner likewise works below the active segment and swaps
under the log's lock). Files a worker uses stay open until it is done (file_cache.worker_io).
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

import trio

from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.storage import disk_health
from kafkalite.storage.cleaner import Cleanable, CleanResult, clean_log
from kafkalite.storage.cleaner_process import (
    CLEANER_POOL,
    CleanJob,
    SegmentInfo,
    WorkerResult,
    clean_in_worker,
)
from kafkalite.storage.errors import StorageError
from kafkalite.storage.file_cache import worker_io
from kafkalite.storage.log import DiskWork, UnifiedLog
from kafkalite.storage.log_manager import DirRemoval, LogManager
from kafkalite.storage.segment import CLEANED_SUFFIX, LogSegment, segment_paths
from kafkalite.storage.txn_index import AbortedTxn

log = logging.getLogger("kafkalite.server")
CLEANING_SWITCH_INTERVAL_S = 0.0005  # for the thread cleaner
CLEAN_IN_PROCESS = True  # False: the cleaner runs on a worker thread of this process
CLEAN_WORK = clean_in_worker  # what the cleaner process runs (tests swap it)


async def maintain(replicas: ReplicaManager, retention_due: bool, cleaning_due: bool) -> None:
    """Flush policy, retention, roll fsyncs and removals, checkpoints, then cleaning."""
    replicas.log_manager.flush_all(replicas.clock_ms())
    if retention_due:
        deleted = replicas.apply_retention()
        if deleted:
            log.info("retention deleted %d segment(s)", deleted)
    for manager in replicas.log_manager.managers:  # one per directory of log.dirs
        await run_disk_work(manager)
        state = manager.checkpoint_state()
        if state is not None:
            await trio.to_thread.run_sync(manager.write_checkpoints, state)
    if cleaning_due:
        reclaimed = await clean_logs(replicas)
        if reclaimed:
            log.info("log cleaner reclaimed %d byte(s)", reclaimed)


async def run_disk_work(manager: LogManager) -> None:
    work = manager.take_disk_work()
    if not work:
        return
    try:
        await trio.to_thread.run_sync(_run_all, work)
    except BaseException as exc:
        for item in work:
            item.retry_later()
        if not isinstance(exc, OSError):
            raise
        disk_health.write_failed(manager.log_dir, exc)  # e.g. a full disk: logged once
        return
    for item in work:
        item.finish()


def _run_all(work: list[DiskWork | DirRemoval]) -> None:
    with worker_io():
        for item in work:
            item.run()


async def clean_logs(replicas: ReplicaManager) -> int:
    """Compact every compacted log that is due, one at a time, each on a worker thread."""
    reclaimed = 0
    for manager in replicas.log_manager.managers:
        reclaimed += await _clean_dir(replicas, manager)
    return reclaimed


async def _clean_dir(replicas: ReplicaManager, manager: LogManager) -> int:
    reclaimed = 0
    changed = False
    for tp in manager.cleanable_logs():
        partition = replicas.partition(*tp)
        partition_log = manager.logs.get(tp)
        if partition is None or partition_log is None:
            continue
        now_ms = replicas.clock_ms()
        cleanable = manager.plan_cleaning(tp, now_ms, partition.high_watermark)
        if cleanable is None:
            continue
        segments = partition_log.segments[: cleanable.segment_count]
        partition_log.cleaning = True
        try:
            result = await _clean_one(partition_log, cleanable, segments, now_ms)
        except (StorageError, OSError):
            if manager.logs.get(tp) is partition_log:  # not deleted meanwhile
                manager.cleaning_failed(tp)
            continue
        except BrokenProcessPool:  # the worker died (killed, out of memory): try next round
            log.warning("%s: the cleaner process died; cleaning it again later", partition_log.dir)
            CLEANER_POOL.shutdown()
            await trio.to_thread.run_sync(_discard_cleaned, partition_log.dir, segments)
            continue
        finally:
            partition_log.cleaning = False
        reclaimed += result.bytes_reclaimed
        changed |= manager.cleaning_done(tp, result)
    if changed:
        offsets = manager.cleaner_offsets_state()
        try:
            await trio.to_thread.run_sync(manager.write_cleaner_offsets, offsets)
        except OSError as exc:  # written again after the next cleaning
            disk_health.write_failed(manager.log_dir, exc)
    return reclaimed


class _NoProcess(Exception):
    pass


async def _clean_one(
    partition_log: UnifiedLog, cleanable: Cleanable, segments: list[LogSegment], now_ms: int
) -> CleanResult:
    global CLEAN_IN_PROCESS
    if CLEAN_IN_PROCESS:
        try:
            return await clean_in_process(partition_log, cleanable, segments, now_ms)
        except _NoProcess as exc:
            log.warning("the cleaner process cannot start (%s); cleaning on a thread", exc)
            CLEAN_IN_PROCESS = False
    return await trio.to_thread.run_sync(_clean, partition_log, cleanable, segments, now_ms)


async def clean_in_process(
    partition_log: UnifiedLog, cleanable: Cleanable, segments: list[LogSegment], now_ms: int
) -> CleanResult:
    """Clean in the cleaner process, then swap its segments in from a worker thread. When
    the broker stops meanwhile, the process is stopped with it (Broker.shutdown)."""
    job = clean_job(partition_log, cleanable, segments, now_ms)
    try:
        # On a thread: the first submit starts the process, which takes a while.
        future = await trio.to_thread.run_sync(CLEANER_POOL.submit, CLEAN_WORK, job)
    except (OSError, NotImplementedError) as exc:  # e.g. a sandbox without processes
        raise _NoProcess(str(exc)) from exc
    try:
        done = await trio.to_thread.run_sync(future.result, abandon_on_cancel=True)
    except trio.Cancelled:
        future.cancel()
        raise
    return await trio.to_thread.run_sync(
        _swap_cleaned, partition_log, cleanable, segments, done, now_ms
    )


def clean_job(
    partition_log: UnifiedLog, cleanable: Cleanable, segments: list[LogSegment], now_ms: int
) -> CleanJob:
    """On the loop: everything the cleaner process needs, as plain numbers."""
    start, end = cleanable.first_dirty_offset, cleanable.map_end_offset
    mapped = [
        _segment_info(segment, segment.offset_index.lookup(start))
        for segment in partition_log.segments
        if segment.base_offset < end and segment.next_offset > start
    ]
    config = partition_log.config
    producers = partition_log.producer_state.producers
    return CleanJob(
        dir=str(partition_log.dir),
        sources=[_segment_info(segment, 0) for segment in segments],
        mapped=mapped,
        first_dirty_offset=start,
        map_end_offset=end,
        now_ms=now_ms,
        segment_bytes=config.segment_bytes,
        segment_index_bytes=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        max_message_bytes=config.max_message_bytes,
        delete_retention_ms=config.delete_retention_ms,
        last_sequences={pid: entry.last_seq for pid, entry in producers.items()},
        aborted_txns=list(partition_log.aborted_txns),
    )


def _segment_info(segment: LogSegment, map_position: int) -> SegmentInfo:
    return SegmentInfo(
        base_offset=segment.base_offset,
        size=segment.size,
        next_offset=segment.next_offset,
        map_position=map_position,
        index_entries=len(segment.offset_index),
        time_index_entries=len(segment.time_index),
        largest_timestamp=segment.largest_timestamp(),
    )


def _swap_cleaned(
    partition_log: UnifiedLog,
    cleanable: Cleanable,
    segments: list[LogSegment],
    done: WorkerResult,
    now_ms: int,
) -> CleanResult:
    """On a worker thread: swap in each `.cleaned` segment the process wrote, in order."""
    on_loop: Callable[[Callable[[], None]], None] = trio.from_thread.run_sync
    cleaned = written = before = after = 0
    with worker_io():
        for group in done.groups:
            if not group.written:
                continue
            old = segments[group.first : group.first + group.count]
            new = partition_log.open_written_cleaned_segment(old[0].base_offset, now_ms)
            before += sum(segment.size for segment in old)
            after += new.size
            partition_log.replace_segments_from_worker(new, old, on_loop, group.txn_index)
            cleaned += len(old)
            written += 1
    result = CleanResult(cleanable.end_offset, cleaned, written, before, after, done.pid)
    if cleaned:
        log.info(
            "%s: cleaned %d segments into %d below offset %d in process %d, %d bytes reclaimed",
            partition_log.dir,
            cleaned,
            written,
            cleanable.end_offset,
            done.pid,
            result.bytes_reclaimed,
        )
    return result


def _discard_cleaned(directory: Path, segments: list[LogSegment]) -> None:
    """What a dead cleaner process left: `.cleaned` files, never part of the log."""
    for segment in segments:
        for path in segment_paths(directory, segment.base_offset, CLEANED_SUFFIX):
            path.unlink(missing_ok=True)


def _pause() -> None:
    """Between the cleaner's batches: stop if the maintenance task is cancelled (shutdown),
    and hand the GIL to the event loop thread if it waits for it (a CPU-bound thread keeps
    it for up to sys.getswitchinterval(), 5 ms, each time the loop wants it back)."""
    trio.from_thread.check_cancelled()
    time.sleep(0)


@contextmanager
def _short_gil_turns() -> Iterator[None]:
    """While the cleaner's CPU-bound thread runs, the loop thread waits for the GIL up to
    the switch interval whenever it wants it back (after every socket call): shorten it.
    The cleaner allocates a record object per record, which sets off full cyclic garbage
    collections (measured: 40-190 ms each, with the GIL held); its records hold no cycles,
    so collection waits until the cleaning is over."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(CLEANING_SWITCH_INTERVAL_S)
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        sys.setswitchinterval(previous)
        if collecting:
            gc.enable()


def _clean(
    partition_log: UnifiedLog, cleanable: Cleanable, segments: list[LogSegment], now_ms: int
) -> CleanResult:
    on_loop: Callable[[Callable[[], None]], None] = trio.from_thread.run_sync

    def swap(new: LogSegment, old: list[LogSegment], kept_txns: list[AbortedTxn]) -> None:
        partition_log.replace_segments_from_worker(new, old, on_loop, kept_txns)

    with worker_io(), _short_gil_turns():
        return clean_log(
            partition_log,
            cleanable,
            now_ms,
            segments=segments,
            swap=swap,
            pause=_pause,
        )
