"""Periodic log work with the disk-heavy parts on worker threads, off the event loop.

The loop thread keeps every change to a log's state (segment lists, recovery points, offsets);
worker threads (trio.to_thread) do what may block for long: the fsyncs after a roll, unlinking
deleted segments, checkpoint writes, and the cleaner's reading and rewriting of segments.
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
from contextlib import contextmanager

import trio

from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.storage import disk_health
from kafkalite.storage.cleaner import Cleanable, CleanResult, clean_log
from kafkalite.storage.errors import StorageError
from kafkalite.storage.file_cache import worker_io
from kafkalite.storage.log import DiskWork, UnifiedLog
from kafkalite.storage.log_manager import DirRemoval, LogManager
from kafkalite.storage.segment import LogSegment

log = logging.getLogger("kafkalite.server")
CLEANING_SWITCH_INTERVAL_S = 0.0005


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
            result = await trio.to_thread.run_sync(
                _clean, partition_log, cleanable, segments, now_ms
            )
        except (StorageError, OSError):
            if manager.logs.get(tp) is partition_log:  # not deleted meanwhile
                manager.cleaning_failed(tp)
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

    def swap(new: LogSegment, old: list[LogSegment]) -> None:
        partition_log.replace_segments_from_worker(new, old, on_loop)

    with worker_io(), _short_gil_turns():
        return clean_log(
            partition_log,
            cleanable,
            now_ms,
            segments=segments,
            swap=swap,
            pause=_pause,
        )
