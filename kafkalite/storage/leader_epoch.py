"""LeaderEpochCache: the first offset of each leader epoch, as Kafka's LeaderEpochFileCache.

Persisted to `leader-epoch-checkpoint` in the partition dir in Kafka's checkpoint format:
a version line "0", an entry count line, then "epoch start_offset" lines. Every change is
written to a temporary file and renamed over the old one.

A new entry (`assign`) is not fsynced at once (as Kafka since KAFKA-15046): until the log's
next flush only unflushed batches carry the new epoch, and a restart rebuilds the entries of
unflushed batches, or all of them if the file is lost or torn, from the batches themselves.
The log syncs the file (`take_unsynced`) before its recovery point passes them. Truncations
and rebuilds are fsynced at once: a stale file must never claim epochs the log lost.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage.durable_files import replace_unsynced, write_atomically

log = logging.getLogger("kafkalite.storage")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(eq=False)
class LeaderEpochCache:
    path: Path
    entries: list[EpochEntry] = field(default_factory=list)  # ascending epoch and offset
    loaded_ok: bool = True  # False if the file was missing or unreadable
    unsynced: bool = False  # the file was replaced without fsync (see the module docstring)

    @classmethod
    def load(cls, dir: Path) -> LeaderEpochCache:
        path = dir / CHECKPOINT_FILE
        try:
            return cls(path, _parse(path.read_text()))
        except FileNotFoundError:
            return cls(path, loaded_ok=False)
        except (ValueError, IndexError, TypeError) as exc:
            log.warning("%s is corrupt (%s); rebuilding leader epochs", path, exc)
            return cls(path, loaded_ok=False)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; drops entries it contradicts."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry {epoch} at {start_offset}")
        latest = self.latest_entry
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return
        entries = list(self.entries)
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
            entries.pop()
        entries.append(EpochEntry(epoch, start_offset))
        replace_unsynced(self.path, _content(entries))  # first: a full disk changes nothing
        self.entries = entries
        self.unsynced = True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's endOffsetFor: (largest epoch <= requested, start offset of the next epoch)."""
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.entries and self.entries[-1].epoch == epoch:
            return epoch, log_end_offset
        epochs = [entry.epoch for entry in self.entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self.entries[0].start_offset
        return self.entries[higher - 1].epoch, self.entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the entry with the greatest start offset <= `offset` (-1 if none)."""
        starts = [entry.start_offset for entry in self.entries]
        slot = bisect_right(starts, offset) - 1
        return self.entries[slot].epoch if slot >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (log truncated to it)."""
        if end_offset < 0 or not self.entries or self.entries[-1].start_offset < end_offset:
            return
        while self.entries and self.entries[-1].start_offset >= end_offset:
            self.entries.pop()
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to `start_offset`: the epoch covering it now starts there."""
        removed = [entry for entry in self.entries if entry.start_offset <= start_offset]
        if not removed:
            return
        keep = self.entries[len(removed) :]
        self.entries = [EpochEntry(removed[-1].epoch, start_offset), *keep]
        self.flush()

    def clear(self) -> None:
        if self.entries:
            self.entries = []
            self.flush()

    def flush(self) -> None:
        """Write the file durably (fsynced, with its directory)."""
        write_atomically(self.path, _content(self.entries))
        self.unsynced = False

    def take_unsynced(self) -> bool:
        """True once per unsynced write: the caller fsyncs the file and its directory."""
        unsynced, self.unsynced = self.unsynced, False
        return unsynced


def _content(entries: list[EpochEntry]) -> str:
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{entry.epoch} {entry.start_offset}" for entry in entries]
    return "\n".join(lines) + "\n"


def _parse(text: str) -> list[EpochEntry]:
    lines = text.splitlines()
    if int(lines[0]) != VERSION:
        raise ValueError(f"unknown version {lines[0]!r}")
    count = int(lines[1])
    entries = [EpochEntry(*map(int, line.split())) for line in lines[2 : 2 + count]]
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    return entries


def parse_checkpoint(data: bytes) -> list[EpochEntry]:
    """A leader epoch checkpoint's entries (as uploaded with a remote segment)."""
    return _parse(data.decode())
