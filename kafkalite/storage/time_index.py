"""TimeIndex: sparse map from max timestamp so far to offset in a segment's `.timeindex`.

Entries are (timestamp i64, relative offset i32), big-endian, 12 bytes each, the format of
Kafka's TimeIndex. An entry is only added when its timestamp exceeds the last one, so
timestamps are strictly increasing and bisect finds where a timestamp search starts.
"""

from __future__ import annotations

import operator
import os
import struct
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

from kafkalite.storage.errors import CorruptIndexError
from kafkalite.storage.index_file import IndexFile

ENTRY_SIZE = 12
NO_TIMESTAMP = -1
_ENTRY = struct.Struct(">qi")


@dataclass(eq=False)
class TimeIndex(IndexFile):
    ENTRY_SIZE = ENTRY_SIZE

    _timestamps: array = field(default_factory=lambda: array("q"), repr=False)

    def _load(self, data: bytes) -> None:
        for timestamp, relative in _ENTRY.iter_unpack(data):
            self._timestamps.append(timestamp)
            self._offsets.append(relative)

    def _columns(self) -> tuple[array, array]:
        return self._timestamps, self._offsets

    def sanity_check(self) -> None:
        """Timestamps strictly increasing, offsets non-decreasing and non-negative."""
        stamps, offsets = self._timestamps.tolist(), self._offsets.tolist()
        if not stamps:
            return
        if not all(map(operator.lt, stamps, stamps[1:])):
            raise CorruptIndexError(f"{self.path}: timestamps are not strictly increasing")
        if offsets[0] < 0 or not all(map(operator.le, offsets, offsets[1:])):
            raise CorruptIndexError(f"{self.path}: offsets are not increasing")

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, (-1, base offset) if empty."""
        if not self._timestamps:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if timestamp <= self.last_entry[0]:
            return  # also skips NO_TIMESTAMP on an empty index, as Kafka's lastEntry does
        if self.is_full and not skip_full_check:
            return
        relative = offset - self.base_offset
        if self._offsets and relative < self._offsets[-1]:
            return
        os.pwrite(self.fd, _ENTRY.pack(timestamp, relative), len(self._timestamps) * ENTRY_SIZE)
        self._timestamps.append(timestamp)
        self._offsets.append(relative)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry with timestamp <= `timestamp`.

        (-1, base offset) when there is none: the search then starts at the segment start.
        """
        slot = bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[slot], self.base_offset + self._offsets[slot]
