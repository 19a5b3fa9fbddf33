"""Encode real magic v2 record batches for storage tests (varint records, CRC32C)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam
import zstandard
from crc32c import crc32c

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
SNAPPY_RAW = 102  # test-only: snappy without xerial framing (librdkafka style)


@dataclass(frozen=True)
class Record:
    value: bytes | None = b"v"
    key: bytes | None = None
    timestamp: int | None = None  # defaults to the batch's base timestamp
    headers: Sequence[tuple[str, bytes | None]] = ()


def varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    body = bytearray(b"\x00")
    body += varint(timestamp_delta) + varint(offset_delta)
    body += _bytes_field(record.key) + _bytes_field(record.value)
    body += varint(len(record.headers))
    for name, value in record.headers:
        body += _bytes_field(name.encode()) + _bytes_field(value)
    return varint(len(body)) + bytes(body)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:  # xerial framing, as the Java client writes
        block = bytes(cramjam.snappy.compress_raw(data))
        header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        return header + struct.pack(">i", len(block)) + block
    if codec == SNAPPY_RAW:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))  # LZ4 frame format
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(codec)


def make_batch(
    records: Sequence[Record] | int = 1,
    *,
    base_offset: int = 0,
    base_timestamp: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = NONE,
    leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    value_size: int = 1,
) -> bytes:
    """A magic v2 batch; `records` may be a count of records with `value_size`-byte values."""
    if isinstance(records, int):
        records = [Record(value=b"x" * value_size) for _ in range(records)]
    stamps = [r.timestamp if r.timestamp is not None else base_timestamp for r in records]
    body = b"".join(
        encode_record(r, i, ts - base_timestamp)
        for i, (r, ts) in enumerate(zip(records, stamps, strict=True))
    )
    codec = SNAPPY if compression == SNAPPY_RAW else compression
    attributes = codec | (0x08 if log_append_time else 0)
    attributes |= (0x10 if transactional else 0) | (0x20 if control else 0)
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        base_timestamp,
        max(stamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + compress(compression, body)
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, 2, crc) + after_crc
