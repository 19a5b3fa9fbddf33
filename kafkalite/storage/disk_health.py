"""Write failures per log directory, logged once per episode rather than once per request.

A full disk fails every append with KAFKA_STORAGE_ERROR; the broker logs the first failure
in a directory as an error and, once a write there succeeds again, that it recovered.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

log = logging.getLogger("kafkalite.storage")

_failing: dict[Path, str] = {}  # log dir -> first error of the current episode
_lock = threading.Lock()


def write_failed(log_dir: Path, exc: OSError) -> None:
    with _lock:
        if log_dir in _failing:
            return
        _failing[log_dir] = str(exc)
    log.error(
        "writes to log dir %s fail (%s); producers get KAFKA_STORAGE_ERROR until they succeed",
        log_dir,
        exc.strerror or exc,
    )


def write_succeeded(log_dir: Path) -> None:
    if log_dir not in _failing:  # the common case: no lock
        return
    with _lock:
        if _failing.pop(log_dir, None) is None:
            return
    log.info("writes to log dir %s succeed again", log_dir)


def is_failing(log_dir: Path) -> bool:
    return log_dir in _failing
