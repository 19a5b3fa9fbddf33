"""Decode the records inside one magic v2 batch, only for timestamp lookups (rare path).

Record layout (varints are zigzag-encoded): length, attributes i8, timestampDelta varlong,
offsetDelta varint, key, value, headers. Only the timestamp and offset are needed, so each
record is skipped via its length once those two fields are read.
"""

from __future__ import annotations

import struct

import cramjam
import zstandard

from kafkalite.storage.batch import HEADER_SIZE, TIMESTAMP_TYPE_MASK, parse_header
from kafkalite.storage.errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16  # magic, version i32, compatible version i32
SNAPPY_FRAMING_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_I32 = struct.Struct(">i")


def record_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of the batch, in order.

    With LogAppendTime every record's timestamp is the batch's maxTimestamp, as in Kafka.
    """
    header = parse_header(batch)
    payload = decompress(header.compression, memoryview(batch)[HEADER_SIZE : header.size])
    entries = _decode(payload, header.records_count, header.base_offset, header.base_timestamp)
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return [(offset, header.max_timestamp) for offset, _ in entries]
    return entries


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == SNAPPY:
            return _snappy(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == ZSTD:
            return zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))
    except (cramjam.DecompressionError, zstandard.ZstdError, ValueError) as exc:
        raise CorruptRecordError(f"cannot decompress batch (codec {codec}): {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _snappy(data: bytes) -> bytes:
    """Xerial framing (Java clients), the official framing format, or a raw block."""
    if data.startswith(XERIAL_MAGIC):
        out, pos = bytearray(), XERIAL_HEADER_SIZE
        while pos + 4 <= len(data):
            (length,) = _I32.unpack_from(data, pos)
            pos += 4
            out += cramjam.snappy.decompress_raw(data[pos : pos + length])
            pos += length
        return bytes(out)
    if data.startswith(SNAPPY_FRAMING_MAGIC):
        return bytes(cramjam.snappy.decompress(data))
    return bytes(cramjam.snappy.decompress_raw(data))


def _decode(
    data: bytes, count: int, base_offset: int, base_timestamp: int
) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = 0
    try:
        for _ in range(count):
            length, pos = _varint(data, pos)
            end = pos + length
            pos += 1  # attributes
            timestamp_delta, pos = _varint(data, pos)
            offset_delta, pos = _varint(data, pos)
            out.append((base_offset + offset_delta, base_timestamp + timestamp_delta))
            pos = end
    except IndexError as exc:
        raise CorruptRecordError("record data ends inside a record") from exc
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint (up to 64 bits) at `pos` -> (value, next position)."""
    raw = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")
