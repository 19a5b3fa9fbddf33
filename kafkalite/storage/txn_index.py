"""The aborted-transaction index (Kafka's TransactionIndex, `<base>.txnindex` per segment).

Each entry is 34 bytes: version int16 (0), producer id int64, first offset int64, last
offset int64 (the abort marker's offset), last stable offset int64. read_committed fetches
list the aborted transactions overlapping the fetched range so clients drop their records.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def txn_index_path(dir: Path, base_offset: int) -> Path:
    return dir / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


def append_entry(dir: Path, segment_base: int, entry: AbortedTxn) -> None:
    data = _ENTRY.pack(
        ENTRY_VERSION,
        entry.producer_id,
        entry.first_offset,
        entry.last_offset,
        entry.last_stable_offset,
    )
    fd = os.open(txn_index_path(dir, segment_base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_entries(path: Path) -> list[AbortedTxn]:
    """Whole entries of one index file (a torn last entry is ignored)."""
    data = path.read_bytes()
    usable = len(data) - len(data) % _ENTRY.size
    return [AbortedTxn(*_ENTRY.unpack_from(data, pos)[1:]) for pos in range(0, usable, _ENTRY.size)]


def rewrite(dir: Path, segment_base: int, entries: list[AbortedTxn]) -> None:
    """Replace a segment's index (after truncation); no file when nothing is left."""
    path = txn_index_path(dir, segment_base)
    path.unlink(missing_ok=True)
    for entry in entries:
        append_entry(dir, segment_base, entry)


def rewrite_atomically(dir: Path, segment_base: int, entries: list[AbortedTxn]) -> None:
    """Replace a segment's index in one rename (the cleaner's); no file when it is empty."""
    path = txn_index_path(dir, segment_base)
    if not entries:
        path.unlink(missing_ok=True)
        return
    data = b"".join(
        _ENTRY.pack(
            ENTRY_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset
        )
        for e in entries
    )
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
