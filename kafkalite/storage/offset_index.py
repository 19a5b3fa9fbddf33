"""OffsetIndex: sparse map from offset to file position in one segment's `.index` file.

Entries are (relative offset i32, position i32), big-endian, 8 bytes each, the format of
Kafka's OffsetIndex, mirrored in memory for bisect (see IndexFile).
"""

from __future__ import annotations

import operator
import os
import struct
import sys
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

from kafkalite.storage.errors import CorruptIndexError
from kafkalite.storage.index_file import IndexFile

ENTRY_SIZE = 8
_ENTRY = struct.Struct(">ii")


@dataclass(eq=False)
class OffsetIndex(IndexFile):
    ENTRY_SIZE = ENTRY_SIZE

    _positions: array = field(default_factory=lambda: array("i"), repr=False)

    def _load(self, data: bytes) -> None:
        pairs = array("i", data)
        if sys.byteorder == "little":
            pairs.byteswap()  # the file is big-endian
        self._offsets = pairs[0::2]
        self._positions = pairs[1::2]

    def _columns(self) -> tuple[array, array]:
        return self._offsets, self._positions

    def sanity_check(self, segment_size: int) -> None:
        """Kafka's sanityCheck plus monotonicity: raise CorruptIndexError to force a rebuild.

        Whole-array comparisons run in C, so checking a full index at startup stays cheap.
        """
        offsets, positions = self._offsets.tolist(), self._positions.tolist()
        if not offsets:
            return
        if min(offsets) < 0 or not all(map(operator.lt, offsets, offsets[1:])):
            raise CorruptIndexError(f"{self.path}: offsets are not strictly increasing")
        if positions[0] < 0 or not all(map(operator.le, positions, positions[1:])):
            raise CorruptIndexError(f"{self.path}: positions are not increasing")
        if positions[-1] >= segment_size:
            raise CorruptIndexError(f"{self.path}: last entry points past the segment end")

    @property
    def last_offset(self) -> int:
        """Largest indexed offset, or the base offset if the index is empty."""
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._offsets and relative <= self._offsets[-1]:
            return  # only strictly increasing offsets, as Kafka requires
        os.pwrite(self.fd, _ENTRY.pack(relative, position), len(self._offsets) * ENTRY_SIZE)
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup_entry(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry <= offset, else (base offset, 0)."""
        slot = bisect_right(self._offsets, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[slot], self._positions[slot]

    def lookup(self, offset: int) -> int:
        return self.lookup_entry(offset)[1]
