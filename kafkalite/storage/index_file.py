"""File plumbing shared by OffsetIndex and TimeIndex: open, check and read entries."""

from __future__ import annotations

import os
from pathlib import Path

from kafkalite.storage.errors import CorruptIndexError


def open_index_file(path: Path, entry_size: int) -> tuple[int, bytes]:
    """Open or create an index file; returns (fd, its entries' bytes).

    Raises CorruptIndexError (with the fd closed) when the size is not whole entries, so the
    segment rebuilds the index from its log.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    size = os.fstat(fd).st_size
    if size % entry_size:
        os.close(fd)
        raise CorruptIndexError(f"{path}: size {size} is not a multiple of {entry_size}")
    return fd, os.pread(fd, size, 0)
