"""Crash-safe file writes: whole-file replacement and directory fsync.

Used by every module that keeps a small file next to the data (leader epoch and producer
state checkpoints, recovery and cleaner checkpoints, the metadata store).

`replace_unsynced` + `fsync_file` later are for a file rebuilt from the log when it is lost
or torn (the leader epoch checkpoint): its fsyncs wait for the log's next flush.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, content: str | bytes) -> None:
    """tmp file + fsync + rename + directory fsync, so a crash leaves old or new content."""
    _replace(path, content, sync=True)
    fsync_dir(path.parent)


def replace_unsynced(path: Path, content: str | bytes) -> None:
    """tmp file + rename, no fsync: readers see old or new content; after a power loss the
    file may be old, missing or empty until `fsync_file` and a directory fsync ran."""
    _replace(path, content, sync=False)


def _replace(path: Path, content: str | bytes, sync: bool) -> None:
    data = content.encode() if isinstance(content, str) else content
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def fsync_file(path: Path) -> None:
    """Make a file's content durable (not its directory entry: see fsync_dir)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the creations, renames and removals of entries in directory `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
