"""Crash-safe file writes: whole-file replacement and directory fsync.

Used by every module that keeps a small file next to the data (leader epoch and producer
state checkpoints, recovery and cleaner checkpoints, the metadata store).
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, content: str | bytes) -> None:
    """tmp file + fsync + rename + directory fsync, so a crash leaves old or new content."""
    data = content.encode() if isinstance(content, str) else content
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the creations, renames and removals of entries in directory `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
