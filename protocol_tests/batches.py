"""A small, independent encoder/decoder for Kafka record batches (magic v2) and legacy
message sets (magic v1), so protocol tests can build exactly the bytes they want.

Magic v2 layout (big-endian):
    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records...
The CRC is CRC-32C over attributes..end. Records use zigzag varints.
"""

from __future__ import annotations

import gzip
import struct
import time
import zlib
from dataclasses import dataclass, field

import cramjam
import zstandard
from crc32c import crc32c

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
HEADER_SIZE = 61
LOG_OVERHEAD = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21

_HEADER = struct.Struct(">qiibIhiqqqhii")

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
SNAPPY_RAW = 102  # test-only: snappy blocks without xerial framing (as librdkafka writes)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


@dataclass(frozen=True)
class Record:
    key: bytes | None = None
    value: bytes | None = b""
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None  # absolute ms; None: the batch's base timestamp


@dataclass
class DecodedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class DecodedBatch:
    base_offset: int
    partition_leader_epoch: int
    magic: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[DecodedRecord]

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- varints ---------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """Zigzag varint (Kafka's ByteUtils.writeVarint/writeVarlong)."""
    raw = (value << 1) ^ (value >> 63)
    raw &= (1 << 64) - 1
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return varint(-1)
    return varint(len(value)) + value


# -- compression -----------------------------------------------------------------------------


def compress(codec: int, data: bytes) -> bytes:
    """The records section compressed as Kafka's Java producer writes it."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:  # xerial framing, as the Java client's SnappyOutputStream
        block = bytes(cramjam.snappy.compress_raw(data))
        header = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
        return header + struct.pack(">i", len(block)) + block
    if codec == SNAPPY_RAW:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:  # the LZ4 frame format (KafkaLZ4BlockOutputStream)
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown codec {codec}")


def decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            out, pos = bytearray(), 16
            while pos + 4 <= len(data):
                (length,) = struct.unpack_from(">i", data, pos)
                out += cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + length])
                pos += 4 + length
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise ValueError(f"unknown codec {codec}")


# -- encoding --------------------------------------------------------------------------------


def encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    timestamp = base_timestamp if record.timestamp is None else record.timestamp
    body = bytearray()
    body.append(0)  # attributes
    body += varint(timestamp - base_timestamp)
    body += varint(offset_delta)
    body += _bytes_field(record.key)
    body += _bytes_field(record.value)
    body += varint(len(record.headers))
    for name, value in record.headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(value)
    return varint(len(body)) + bytes(body)


def build_batch(
    records: list[Record] | tuple[Record, ...],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
    attributes: int = 0,
    magic: int = 2,
    compression: int = NONE,
) -> bytes:
    """One magic v2 batch with a correct CRC, its records compressed with `compression`."""
    if base_timestamp is None:
        stamps = [r.timestamp for r in records if r.timestamp is not None]
        base_timestamp = min(stamps) if stamps else now_ms()
    encoded = compress(
        compression,
        b"".join(
            encode_record(record, delta, base_timestamp) for delta, record in enumerate(records)
        ),
    )
    attributes |= SNAPPY if compression == SNAPPY_RAW else compression
    max_timestamp = max(
        (base_timestamp if r.timestamp is None else r.timestamp for r in records),
        default=base_timestamp,
    )
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(records) - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + encoded
    )
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch, magic, crc, rest
    return (
        struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, magic, crc)
        + after_crc
    )


def simple_batch(count: int = 1, prefix: bytes = b"value", **kwargs: object) -> bytes:
    records = [Record(key=b"k%d" % i, value=prefix + b"-%d" % i) for i in range(count)]
    return build_batch(records, **kwargs)  # type: ignore[arg-type]


def idempotent_batch(pid: int, epoch: int, sequence: int, count: int, tag: bytes) -> bytes:
    """A simple_batch of producer `pid` at `epoch`, its records numbered from `sequence`."""
    return simple_batch(count, tag, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)


def with_bad_crc(batch: bytes) -> bytes:
    """The same batch with its CRC flipped (the payload stays intact)."""
    (crc,) = struct.unpack_from(">I", batch, CRC_OFFSET)
    return batch[:CRC_OFFSET] + struct.pack(">I", crc ^ 0xDEADBEEF) + batch[CRC_OFFSET + 4 :]


def build_magic_v1_message_set(
    key: bytes | None, value: bytes | None, timestamp: int | None = None, offset: int = 0
) -> bytes:
    """A legacy (magic 1) message set of one uncompressed message.

    offset i64 | messageSize i32 | crc u32 (CRC-32 of magic..end) | magic i8 | attributes i8 |
    timestamp i64 | key bytes(i32 length) | value bytes(i32 length)
    """

    def i32_bytes(data: bytes | None) -> bytes:
        if data is None:
            return struct.pack(">i", -1)
        return struct.pack(">i", len(data)) + data

    stamp = now_ms() if timestamp is None else timestamp
    body = struct.pack(">bbq", 1, 0, stamp) + i32_bytes(key) + i32_bytes(value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


# -- decoding --------------------------------------------------------------------------------


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        return None, pos
    return data[pos : pos + length], pos + length


def decode_batches(data: bytes | None) -> list[DecodedBatch]:
    """Every whole magic v2 batch in `data` (a Fetch response's records), decompressed."""
    batches: list[DecodedBatch] = []
    if not data:
        return batches
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        (
            base_offset,
            batch_length,
            leader_epoch,
            magic,
            _crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = _HEADER.unpack_from(data, pos)
        end = pos + LOG_OVERHEAD + batch_length
        if end > len(data):
            break  # a partial batch at the end of a fetch response
        body = decompress(attributes & 0x07, data[pos + HEADER_SIZE : end])
        records = []
        rpos = 0
        for _ in range(count):
            length, rpos = read_varint(body, rpos)
            record_end = rpos + length
            rpos += 1  # attributes
            ts_delta, rpos = read_varint(body, rpos)
            offset_delta, rpos = read_varint(body, rpos)
            key, rpos = _read_bytes(body, rpos)
            value, rpos = _read_bytes(body, rpos)
            header_count, rpos = read_varint(body, rpos)
            headers = []
            for _ in range(header_count):
                name, rpos = _read_bytes(body, rpos)
                header_value, rpos = _read_bytes(body, rpos)
                headers.append(((name or b"").decode(), header_value))
            records.append(
                DecodedRecord(
                    base_offset + offset_delta, base_timestamp + ts_delta, key, value, headers
                )
            )
            rpos = record_end
        batches.append(
            DecodedBatch(
                base_offset,
                leader_epoch,
                magic,
                attributes,
                last_offset_delta,
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                records,
            )
        )
        pos = end
    return batches


def decode_records(data: bytes | None) -> list[DecodedRecord]:
    return [record for batch in decode_batches(data) for record in batch.records]
