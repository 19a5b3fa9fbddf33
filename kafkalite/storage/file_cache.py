"""Open segment and index files on demand, within a budget of file descriptors.

A broker with thousands of partitions has three files per segment; holding them all open
exhausts RLIMIT_NOFILE (Kafka leans on mmap and a high ulimit instead). Each `CachedFile`
opens its descriptor on first use and the least recently used ones are closed when more than
`capacity` are open, to be reopened on their next use.

Threads: only the event-loop thread evicts. A worker thread inside `worker_io()` pins every
file it touches until it leaves, so the loop never closes a descriptor under it, and a
`close()` of a pinned file is deferred to the unpin.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("kafkalite.storage")

MIN_CAPACITY = 32
DEFAULT_CAPACITY = 512
# Soft RLIMIT_NOFILE target when the hard limit is unlimited (Linux refuses "infinity").
UNLIMITED_TARGET = 1 << 20

_worker = threading.local()


class FileCache:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._open: OrderedDict[CachedFile, None] = OrderedDict()
        self._lock = threading.RLock()

    @property
    def open_count(self) -> int:
        return len(self._open)

    def acquire(self, file: CachedFile) -> int:
        with self._lock:
            if file._fd < 0:
                file._fd = self._open_file(file)
                file.flags &= ~os.O_CREAT  # a reopen must not resurrect a deleted file
            self._open[file] = None
            self._open.move_to_end(file)
            pinned = getattr(_worker, "pinned", None)
            if pinned is not None:
                if file not in pinned:
                    pinned.add(file)
                    file._pins += 1
            elif len(self._open) > self.capacity:
                self._evict()
            return file._fd

    def _open_file(self, file: CachedFile) -> int:
        try:
            return os.open(file.path, file.flags, 0o644)
        except OSError as exc:
            if exc.errno != errno.EMFILE or getattr(_worker, "pinned", None) is not None:
                raise  # only the loop thread evicts
        # Out of descriptors (connections use them too): give back half of ours, retry once.
        self._evict(len(self._open) // 2)
        return os.open(file.path, file.flags, 0o644)

    def _evict(self, count: int | None = None) -> None:
        """Close the `count` (default: beyond capacity) least recently used unpinned files."""
        excess = len(self._open) - self.capacity if count is None else count
        for victim in list(itertools.islice(self._open, excess + 64)):
            if excess <= 0:
                break
            if victim._pins == 0:
                victim._close_now()
                excess -= 1

    def release(self, file: CachedFile) -> None:
        with self._lock:
            self._open.pop(file, None)

    def unpin(self, files: set[CachedFile]) -> None:
        with self._lock:
            for file in files:
                file._pins -= 1
                if file._pins == 0 and file._close_pending:
                    file._close_now()


FILES = FileCache()


class CachedFile:
    """A file whose descriptor `fd` is (re)opened on use; `path` follows renames."""

    __slots__ = ("path", "flags", "_fd", "_pins", "_close_pending", "_cache")

    def __init__(self, path: Path, flags: int, cache: FileCache = FILES) -> None:
        self.path = path
        self.flags = flags
        self._fd = -1
        self._pins = 0
        self._close_pending = False
        self._cache = cache
        self.fd  # noqa: B018 - open now, so a bad path fails where the file is opened

    @property
    def fd(self) -> int:
        if self._close_pending:  # closed while a worker still reads it: only the worker may
            return self._fd
        return self._cache.acquire(self)

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def close(self) -> None:
        with self._cache._lock:
            if self._pins:
                self._close_pending = True
            else:
                self._close_now()

    def _close_now(self) -> None:
        self._cache.release(self)
        self._close_pending = False
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


@contextmanager
def worker_io() -> Iterator[None]:
    """Mark this (worker) thread: files it touches are pinned open until the block ends."""
    pinned: set[CachedFile] = set()
    _worker.pinned = pinned
    try:
        yield
    finally:
        _worker.pinned = None
        FILES.unpin(pinned)


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as far as the kernel allows) and size
    the file cache to half of it, leaving the rest to connections and short-lived files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        for candidate in (target, 1 << 16, 1 << 14):
            if soft < candidate <= target:
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (candidate, hard))
                except (ValueError, OSError):
                    continue
                log.info(
                    "raised the open file limit (RLIMIT_NOFILE) from %d to %d", soft, candidate
                )
                soft = candidate
                break
    limit = UNLIMITED_TARGET if soft == resource.RLIM_INFINITY else soft
    FILES.capacity = max(MIN_CAPACITY, limit // 2)
    return limit
