"""Periodic log work with the disk-heavy parts on worker threads, off the event loop.

The loop thread keeps every change to a log's state (segment lists, recovery points, offsets);
worker threads (trio.to_thread) do what may block for long: the fsyncs after a roll, unlinking
deleted segments, checkpoint writes and the cleaner's swaps. The cleaner's CPU work (offset
map, rewriting segments: storage/cleaner.py) runs where the log directories' LogCleaner runs
it (storage/log_cleaner.py): in a process of its own, so it never holds this interpreter's
GIL; on a worker thread only where no process can start.
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
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

import trio

from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.storage import disk_health
from kafkalite.storage.cleaner import (
    Cleanable,
    CleanedSegments,
    CleanJob,
    CleanResult,
    discard_cleaned,
)
from kafkalite.storage.errors import StorageError
from kafkalite.storage.file_cache import worker_io
from kafkalite.storage.log import DiskWork, UnifiedLog
from kafkalite.storage.log_cleaner import LogCleaner
from kafkalite.storage.log_manager import DirRemoval, LogManager
from kafkalite.storage.segment import LogSegment

log = logging.getLogger("kafkalite.server")
CLEANING_SWITCH_INTERVAL_S = 0.0005  # while a cleaning runs on a worker thread


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


async def clean_logs(replicas: ReplicaManager, cleaner: LogCleaner | None = None) -> int:
    """Compact every compacted log that is due, one at a time, with `cleaner` (default: the
    log directories' own, which cleans in its worker process)."""
    cleaner = cleaner or replicas.log_manager.cleaner
    reclaimed = 0
    for manager in replicas.log_manager.managers:
        reclaimed += await _clean_dir(replicas, manager, cleaner)
    return reclaimed


async def _clean_dir(replicas: ReplicaManager, manager: LogManager, cleaner: LogCleaner) -> int:
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
        partition_log.cleaning = True
        try:
            result = await clean_log(cleaner, partition_log, cleanable, now_ms)
        except (StorageError, OSError):
            if manager.logs.get(tp) is partition_log:  # not deleted meanwhile
                manager.cleaning_failed(tp)
            continue
        except BrokenProcessPool:  # the worker died (killed, out of memory): try next round
            log.warning("%s: the cleaner process died; cleaning it again later", partition_log.dir)
            cleaner.shutdown()  # the next cleaning starts a new one
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


async def clean_log(
    cleaner: LogCleaner, partition_log: UnifiedLog, cleanable: Cleanable, now_ms: int
) -> CleanResult:
    """One cleaning: planned on the loop, the segments written by `cleaner` (its process, or
    a worker thread), then swapped in from a worker thread. When the broker stops meanwhile,
    the process is stopped with it (LogDirs.shutdown)."""
    segments = partition_log.segments[: cleanable.segment_count]
    job = partition_log.clean_job(cleanable, segments, now_ms)
    try:
        cleaned = await _write_cleaned(cleaner, job)
    except BrokenProcessPool:
        await trio.to_thread.run_sync(discard_cleaned, job)
        raise
    return await trio.to_thread.run_sync(
        _swap_cleaned, partition_log, cleanable, segments, cleaned, now_ms
    )


async def _write_cleaned(cleaner: LogCleaner, job: CleanJob) -> CleanedSegments:
    # On a thread: the first submit starts the process, which takes a while.
    future = await trio.to_thread.run_sync(cleaner.submit, job)
    if future is None:  # no worker process: on a worker thread of this one
        return await trio.to_thread.run_sync(_run_on_thread, cleaner, job)
    try:
        return await trio.to_thread.run_sync(future.result, abandon_on_cancel=True)
    except trio.Cancelled:
        future.cancel()
        raise


def _swap_cleaned(
    partition_log: UnifiedLog,
    cleanable: Cleanable,
    segments: list[LogSegment],
    cleaned: CleanedSegments,
    now_ms: int,
) -> CleanResult:
    """On a worker thread: the renames and fsyncs here, the segment list change on the loop."""
    with worker_io():
        return partition_log.swap_cleaned(
            cleanable, segments, cleaned, now_ms, on_loop=trio.from_thread.run_sync
        )


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


def _run_on_thread(cleaner: LogCleaner, job: CleanJob) -> CleanedSegments:
    with worker_io(), _short_gil_turns():
        return cleaner.run(job, _pause)
