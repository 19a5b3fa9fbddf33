"""The header index of a rolled segment on disk: `<base offset>.headerindex` beside its
`.log`, `.index` and `.timeindex` (storage/header_index.py builds it; this module stores it).

A reopened log takes a segment's header index from this file instead of reading the segment
again. The file is a cache of what the segment holds, rebuilt from the segment whenever it
cannot be trusted: missing, torn (its CRC fails: written without fsync, a power loss may
leave it short or empty), of another version, for other header names, or stale (its last
batch is not in the segment any more: truncated, or replaced by a compacted segment).

Layout, big-endian: magic "KLHI", version u8, base offset i64, bytes indexed (the segment
size it covers) i64; the names (u16 count; u16 length + UTF-8 each); the values (u32 count;
i32 length, -1 for null, + UTF-8 each); the batches (u32 count; each: position i64, its
61-byte header, a u8 that is 0 for a control batch, else per name in sorted order a u16
count of value numbers and the u32 numbers); then the CRC-32 of all that as u32.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from kafkalite.storage.batch import HEADER_SIZE, BatchHeader, pack_header, parse_header
from kafkalite.storage.durable_files import replace_unsynced
from kafkalite.storage.errors import CorruptIndexError

MAGIC = b"KLHI"
VERSION = 1
# Per indexed header (sorted by name), the values a batch holds (None: a record lacks the
# header or its value is null).
ValueSets = tuple[tuple[str, frozenset[str | None]], ...]

_START = struct.Struct(">4sBqq")
_U8, _U16, _U32 = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I")
_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class IndexedBatch:
    position: int
    header: BatchHeader
    value_sets: ValueSets | None  # None: a control batch


@dataclass(frozen=True, slots=True)
class StoredIndex:
    """What a header index file holds."""

    base_offset: int
    upto: int  # segment bytes indexed
    names: frozenset[str]
    entries: list[IndexedBatch]


def encode(index: StoredIndex) -> bytes:
    names = sorted(index.names)
    values: dict[str | None, int] = {}
    for entry in index.entries:
        for _, seen in entry.value_sets or ():
            for value in sorted(seen, key=lambda v: (v is None, v or "")):
                values.setdefault(value, len(values))
    out = bytearray(_START.pack(MAGIC, VERSION, index.base_offset, index.upto))
    out += _U16.pack(len(names))
    for name in names:
        out += _text(name, _U16)
    out += _U32.pack(len(values))
    for value in values:
        out += _I32.pack(-1) if value is None else _text(value, _I32)
    out += _U32.pack(len(index.entries))
    for entry in index.entries:
        out += _I64.pack(entry.position) + pack_header(entry.header)
        if entry.value_sets is None:
            out += _U8.pack(0)
            continue
        if [name for name, _ in entry.value_sets] != names:
            raise ValueError(f"batch at {entry.position} is indexed for other names")
        out += _U8.pack(1)
        for _, seen in entry.value_sets:
            out += _U16.pack(len(seen))
            out += b"".join(_U32.pack(values[value]) for value in seen)
    out += _U32.pack(zlib.crc32(out))
    return bytes(out)


def _text(value: str, length: struct.Struct) -> bytes:
    data = value.encode()
    return length.pack(len(data)) + data


def decode(data: bytes, path: Path) -> StoredIndex:
    """The index a file holds; CorruptIndexError when it is torn or not one."""
    if len(data) < _START.size + _U32.size or zlib.crc32(data[:-4]) != _U32.unpack(data[-4:])[0]:
        raise CorruptIndexError(f"header index {path} is torn")
    magic, version, base_offset, upto = _START.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise CorruptIndexError(f"header index {path} has magic {magic!r}, version {version}")
    try:
        return _decode_body(_Reader(data, _START.size), base_offset, upto)
    except (struct.error, UnicodeDecodeError, IndexError) as exc:
        raise CorruptIndexError(f"header index {path} is malformed: {exc}") from None


def _decode_body(reader: _Reader, base_offset: int, upto: int) -> StoredIndex:
    names = [reader.text(_U16) for _ in range(reader.read(_U16))]
    values: list[str | None] = []
    for _ in range(reader.read(_U32)):
        length = reader.read(_I32)
        values.append(None if length < 0 else reader.take(length).decode())
    entries = []
    for _ in range(reader.read(_U32)):
        position = reader.read(_I64)
        header = parse_header(reader.take(HEADER_SIZE))
        value_sets = None
        if reader.read(_U8):
            value_sets = tuple(
                (name, frozenset(values[reader.read(_U32)] for _ in range(reader.read(_U16))))
                for name in names
            )
        entries.append(IndexedBatch(position, header, value_sets))
    return StoredIndex(base_offset, upto, frozenset(names), entries)


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = memoryview(data)[:-4], pos

    def read(self, kind: struct.Struct) -> int:
        (value,) = kind.unpack_from(self.data, self.pos)
        self.pos += kind.size
        return int(value)

    def take(self, length: int) -> bytes:
        if self.pos + length > len(self.data):
            raise IndexError("ends inside a field")
        chunk = bytes(self.data[self.pos : self.pos + length])
        self.pos += length
        return chunk

    def text(self, length: struct.Struct) -> str:
        return self.take(self.read(length)).decode()


def save(path: Path, index: StoredIndex) -> None:
    """Write the file whole (tmp + rename; not fsynced: a torn file is rebuilt)."""
    replace_unsynced(path, encode(index))


def load(path: Path) -> StoredIndex | None:
    """The stored index, or None when there is no file; CorruptIndexError when torn."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode(data, path)
