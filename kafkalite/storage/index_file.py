"""IndexFile: what OffsetIndex and TimeIndex share.

Both are files of fixed-size big-endian entries, appended to with pwrite and never
preallocated (the size is always entries * ENTRY_SIZE), mirrored in memory as two arrays:
`_offsets`, the relative offsets both kinds hold, and one more column.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Self

from kafkalite.storage.errors import CorruptIndexError
from kafkalite.storage.file_cache import CachedFile


@dataclass(eq=False)
class IndexFile:
    ENTRY_SIZE: ClassVar[int]

    path: Path
    base_offset: int
    max_entries: int
    file: CachedFile
    _offsets: array = field(default_factory=lambda: array("i"), repr=False)  # relative offsets

    @classmethod
    def open(cls, path: Path, base_offset: int, max_index_bytes: int) -> Self:
        """Open or create the index.

        Raises CorruptIndexError (with the fd closed) when the size is not whole entries, so
        the segment rebuilds the index from its log.
        """
        file = CachedFile(path, os.O_RDWR | os.O_CREAT)
        size = os.fstat(file.fd).st_size
        if size % cls.ENTRY_SIZE:
            file.close()
            raise CorruptIndexError(f"{path}: size {size} is not a multiple of {cls.ENTRY_SIZE}")
        index = cls(path, base_offset, max(1, max_index_bytes // cls.ENTRY_SIZE), file)
        index._load(os.pread(file.fd, size, 0))
        return index

    @property
    def fd(self) -> int:
        return self.file.fd

    def rename(self, path: Path) -> None:
        """Follow a rename done by the caller (an open descriptor stays valid)."""
        self.path = self.file.path = path

    def _load(self, data: bytes) -> None:
        raise NotImplementedError

    def _columns(self) -> tuple[array, array]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= `offset`."""
        self._truncate_entries(bisect_right(self._offsets, offset - self.base_offset - 1))

    def reset(self) -> None:
        self._truncate_entries(0)  # not truncate_to(base): a corrupt entry may be below it

    def _truncate_entries(self, count: int) -> None:
        if count < len(self._offsets):
            for column in self._columns():
                del column[count:]
            os.ftruncate(self.fd, count * self.ENTRY_SIZE)

    def flush(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        self.file.close()
