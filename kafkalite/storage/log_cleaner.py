"""Where cleanings run, after Kafka's LogCleaner: owned by the log directories (LogDirs).

The broker plans a cleaning on its event loop (`UnifiedLog.plan_compaction`, `clean_job`),
runs `cleaner.clean_segments` here, and swaps the written `.cleaned` segments in
(`UnifiedLog.swap_cleaned`). By default the CPU work runs in one long-lived worker process,
so it never holds the broker's GIL and produce latency stays flat (bench/cleaner_latency.py):
started on first use with the 'forkserver' context (forking a process that runs trio's
threads is unsafe), at a lower CPU priority. A worker that dies leaves at most `.cleaned`
files, which are never part of the log. With `worker_process=False`, or once no process can
start (a sandbox), cleanings run in the calling thread.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from kafkalite.storage.cleaner import CleanedSegments, CleanJob, Pause, clean_segments, keep_going

log = logging.getLogger("kafkalite.storage")

Work = Callable[[CleanJob, Pause], CleanedSegments]  # module-level: a process unpickles it
CLEANER_NICENESS = 10


def _lower_priority() -> None:
    """Cleaning is background work: on a busy machine the broker's own threads (and its
    clients) get the CPU first."""
    try:
        os.nice(CLEANER_NICENESS)
    except OSError:
        pass


@dataclass(eq=False)
class LogCleaner:
    """Runs `work` (the cleaning algorithm; tests pass one that fails) for the broker."""

    worker_process: bool = True  # False: clean in the calling thread
    work: Work = clean_segments
    _executor: ProcessPoolExecutor | None = field(default=None, repr=False)

    def submit(self, job: CleanJob) -> Future[CleanedSegments] | None:
        """Start `job` in the worker process; None when cleanings run in this process (then
        call `run`). May block while the process starts: call it from a worker thread."""
        if not self.worker_process:
            return None
        try:
            if self._executor is None:
                context = multiprocessing.get_context("forkserver")
                # Not the default '__main__' (the whole broker): less CPU at start.
                context.set_forkserver_preload([__name__])
                self._executor = ProcessPoolExecutor(
                    1, mp_context=context, initializer=_lower_priority
                )
            return self._executor.submit(self.work, job, keep_going)
        except (OSError, NotImplementedError) as exc:  # e.g. a sandbox without processes
            log.warning("the cleaner process cannot start (%s); cleaning on a thread", exc)
            self.worker_process = False
            return None

    def run(self, job: CleanJob, pause: Pause = keep_going) -> CleanedSegments:
        """Clean `job` in the calling thread; `pause` runs between batches."""
        return self.work(job, pause)

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
