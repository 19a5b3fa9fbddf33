"""The records inside magic v2 batches: decode (rare paths: timestamp lookups, internal
topics, the log cleaner) and encode (batches the broker writes itself).

Record layout (varints are zigzag-encoded): length, attributes i8, timestampDelta varlong,
offsetDelta varint, key, value, headers. The hot path never gets here: client batches are
stored as sent.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam
import zstandard
from crc32c import crc32c

from kafkalite.storage.batch import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    parse_header,
)
from kafkalite.storage.errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16  # magic, version i32, compatible version i32
SNAPPY_FRAMING_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_I32 = struct.Struct(">i")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch; `offset` and `timestamp` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def record_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of the batch, in order.

    With LogAppendTime every record's timestamp is the batch's maxTimestamp, as in Kafka.
    """
    return [(record.offset, record.timestamp) for record in decode_records(batch)]


def decode_records(batch: bytes | memoryview) -> list[Record]:
    """Every record of one batch, decompressed (LogAppendTime applied like Kafka)."""
    header = parse_header(batch)
    payload = decompress(header.compression, memoryview(batch)[HEADER_SIZE : header.size])
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    records = []
    pos = 0
    try:
        for _ in range(header.records_count):
            length, pos = _varint(payload, pos)
            end = pos + length
            pos += 1  # attributes
            timestamp_delta, pos = _varint(payload, pos)
            offset_delta, pos = _varint(payload, pos)
            key, pos = _nullable_bytes(payload, pos)
            value, pos = _nullable_bytes(payload, pos)
            header_count, pos = _varint(payload, pos)
            headers = []
            for _ in range(header_count):
                name, pos = _nullable_bytes(payload, pos)
                header_value, pos = _nullable_bytes(payload, pos)
                headers.append(((name or b"").decode("utf-8", "replace"), header_value))
            timestamp = header.base_timestamp + timestamp_delta
            records.append(
                Record(
                    header.base_offset + offset_delta,
                    timestamp if log_append_time is None else log_append_time,
                    key,
                    value,
                    tuple(headers),
                )
            )
            pos = end
    except IndexError as exc:
        raise CorruptRecordError("record data ends inside a record") from exc
    return records


def encode_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
) -> bytes:
    """One uncompressed magic v2 batch of (key, value) records, all stamped `timestamp`."""
    return encode_record_batch(
        [
            Record(base_offset + delta, timestamp, key, value)
            for delta, (key, value) in enumerate(records)
        ],
        base_offset=base_offset,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        attributes=attributes,
    )


def encode_record_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    last_offset_delta: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    compression: int = NONE,
) -> bytes:
    """One magic v2 batch holding `records` at their own offsets and timestamps, its records
    section compressed with `compression` (the codec bits of `attributes` are replaced).

    Offsets may have gaps (the log cleaner's output) and `last_offset_delta` may reach past
    the last record, as Kafka keeps a cleaned batch's original offset range; the default is
    the last record's delta.
    """
    body = bytearray()
    for record in records:
        encoded = _encode_record(record, base_offset, base_timestamp)
        body += _encode_varint(len(encoded))
        body += encoded
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - base_offset if records else -1
    header = BatchHeader(
        base_offset,
        0,  # batch length and CRC: computed by frame_batch
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return frame_batch(header, bytes(body), len(records), compression)


def frame_batch(header: BatchHeader, body: bytes, records_count: int, compression: int) -> bytes:
    """A batch with `header`'s fields around the encoded records `body` (compressed with
    `compression`, which replaces the header's codec bits): new length, count and CRC."""
    after_crc = _AFTER_CRC.pack(
        (header.attributes & ~COMPRESSION_MASK) | compression,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        records_count,
    ) + compress(compression, body)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    return (
        _BEFORE_CRC.pack(
            header.base_offset, batch_length, header.partition_leader_epoch, 2, crc32c(after_crc)
        )
        + after_crc
    )


def recompress(batch: bytes | memoryview, header: BatchHeader, codec: int) -> bytes:
    """The batch rewritten with `codec`, every other header field kept (Kafka's LogValidator
    does this when a topic's compression.type names a codec the producer did not use)."""
    return encode_record_batch(
        decode_records(batch),
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        attributes=header.attributes,
        compression=codec,
    )


def _encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytearray:
    out = bytearray(b"\x00")  # attributes
    out += _encode_varint(record.timestamp - base_timestamp)
    out += _encode_varint(record.offset - base_offset)
    out += _encode_nullable_bytes(record.key)
    out += _encode_nullable_bytes(record.value)
    out += _encode_varint(len(record.headers))
    for name, value in record.headers:
        out += _encode_nullable_bytes(name.encode())
        out += _encode_nullable_bytes(value)
    return out


def compress(codec: int, data: bytes) -> bytes:
    """The records section compressed as Kafka's Java producer writes it."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:  # xerial framing, as the Java client's SnappyOutputStream
        block = bytes(cramjam.snappy.compress_raw(data))
        return XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(block)) + block
    if codec == LZ4:  # the LZ4 frame format
        return _lz4_frame(data)
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def _lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame of independent blocks and no content checksum, as Kafka's
    Lz4BlockOutputStream writes: the Java client refuses linked blocks (lz4's default)."""
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


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


def _nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _varint(data, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(data):
        raise CorruptRecordError("record field runs past the end of the batch")
    return data[pos:end], end


def _encode_varint(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _encode_nullable_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _encode_varint(-1)
    return _encode_varint(len(value)) + value
