"""One broker per log directory: an exclusive flock on `<log dir>/.lock`, as Kafka's FileLock.

The lock lives as long as the process holds the file descriptor (the kernel drops it when the
process dies, so a kill -9 never leaves a stale lock behind).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class LogDirInUse(Exception):
    """Another process holds the directory's lock."""


def lock_log_dir(log_dir: Path) -> int:
    """Create `log_dir` if needed and lock it; returns the fd that holds the lock."""
    log_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirInUse(
            f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A Kafka instance in "
            "another process or thread is using this directory."
        ) from None
    except OSError:
        os.close(fd)
        raise
    return fd


def unlock_log_dir(fd: int) -> None:
    os.close(fd)  # closing the descriptor releases the flock
