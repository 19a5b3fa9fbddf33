"""The file cache: descriptors beyond the budget are closed least recently used first and
reopened on use; a worker's files stay open until it is done."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kafkalite.storage.file_cache import CachedFile, FileCache, worker_io


def files(tmp_path: Path, cache: FileCache, count: int) -> list[CachedFile]:
    out = []
    for i in range(count):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"%d" % i)
        out.append(CachedFile(path, os.O_RDWR, cache))
    return out


def test_least_recently_used_files_are_closed_and_reopened_on_use(tmp_path: Path) -> None:
    cache = FileCache(capacity=2)
    a, b, c = files(tmp_path, cache, 3)

    assert [f.is_open for f in (a, b, c)] == [False, True, True]
    assert os.pread(a.fd, 1, 0) == b"0"  # reopened; b is now the least recently used
    assert [f.is_open for f in (a, b, c)] == [True, False, True]
    assert cache.open_count == 2


def test_a_workers_files_stay_open_and_their_close_waits_for_it(tmp_path: Path) -> None:
    cache = FileCache(capacity=1)
    (a,) = files(tmp_path, cache, 1)
    inside = threading.Event()
    proceed = threading.Event()
    reads: list[bytes] = []

    def worker() -> None:
        with worker_io():
            fd = a.fd  # pinned from here on
            inside.set()
            proceed.wait(10)
            reads.append(os.pread(fd, 1, 0))

    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(10)
    a.close()  # deferred: the worker still reads it
    assert a.is_open
    proceed.set()
    thread.join(10)
    assert reads == [b"0"]
    assert not a.is_open
    files(tmp_path, cache, 2)  # over capacity again: nothing pinned is left to keep open
    assert cache.open_count == 1
