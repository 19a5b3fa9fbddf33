"""Magic v2 record batch headers: parse, validate and patch without decoding records.

Layout (big-endian), see Kafka's DefaultRecordBatch:
    0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
    17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
    35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32
    57 recordsCount i32 | 61 records...
The CRC (CRC-32C) covers attributes..end, so baseOffset and partitionLeaderEpoch can be
patched in place; a LogAppendTime rewrite touches covered fields and needs a new CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
MAX_COMPRESSION_CODEC = 4  # none, gzip, snappy, lz4, zstd
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class InvalidBatch(ValueError):
    """Why a batch was rejected; `kind` maps onto a Kafka error code."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        # "corrupt" | "unsupported_magic" | "too_large" | "invalid_record" |
        # "unsupported_compression"
        self.kind = kind


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the batch takes in the log, framing included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 2**31

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def pack_header(header: BatchHeader) -> bytes:
    """The HEADER_SIZE bytes `parse_header` reads back as `header`."""
    return _HEADER.pack(
        header.base_offset,
        header.batch_length,
        header.partition_leader_epoch,
        header.magic,
        header.crc,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )


def peek_offset_and_size(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(baseOffset, total size) of the batch at `pos` from its first 12 bytes."""
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return base_offset, length + LOG_OVERHEAD


def iter_batches(buf: bytes | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in `buf`; stops at a partial tail."""
    pos, end = 0, len(buf)
    while pos + HEADER_SIZE <= end:
        header = parse_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def batch_views(records: bytes, headers: list[BatchHeader]) -> Iterator[memoryview]:
    """The bytes of each of these consecutive batches (headers as `validate_batches` gave)."""
    view, pos = memoryview(records), 0
    for header in headers:
        yield view[pos : pos + header.size]
        pos += header.size


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def validate_batches(records: bytes, max_batch_bytes: int) -> list[BatchHeader]:
    """Check framing, magic, CRC and record count of every batch a producer sent.

    Raises InvalidBatch. The payload must hold whole batches only, at least one.
    """
    view = memoryview(records)
    headers: list[BatchHeader] = []
    pos, end = 0, len(view)
    if end == 0:
        raise InvalidBatch("corrupt", "empty record set")
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            raise InvalidBatch("corrupt", f"truncated batch header at byte {pos}")
        if view[pos + MAGIC_OFFSET] != 2:
            raise InvalidBatch(
                "unsupported_magic", f"record batch magic {view[pos + MAGIC_OFFSET]} unsupported"
            )
        if end - pos < HEADER_SIZE:
            raise InvalidBatch("corrupt", f"truncated batch header at byte {pos}")
        header = parse_header(view, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            raise InvalidBatch("corrupt", f"batch length {header.batch_length} out of bounds")
        if header.size > max_batch_bytes:
            raise InvalidBatch(
                "too_large", f"batch of {header.size} bytes exceeds {max_batch_bytes}"
            )
        if header.compression > MAX_COMPRESSION_CODEC:
            raise InvalidBatch(
                "unsupported_compression", f"compression codec {header.compression} unknown"
            )
        if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
            if not (header.records_count == 0 and header.is_control):
                raise InvalidBatch(
                    "invalid_record",
                    f"record count {header.records_count} does not match last offset delta",
                )
        if compute_crc(view[pos : pos + header.size]) != header.crc:
            raise InvalidBatch("corrupt", f"CRC mismatch in batch at byte {pos}")
        headers.append(header)
        pos += header.size
    return headers


def assign_offsets(
    records: bytearray,
    headers: list[BatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None = None,
) -> list[BatchHeader]:
    """Patch base offsets (and epochs) in place, batch after batch, starting at `first_offset`.

    With `log_append_time_ms`, set the timestamp type to LogAppendTime and maxTimestamp to
    that time, then recompute the CRC, as Kafka does for topics using LogAppendTime.
    """
    patched: list[BatchHeader] = []
    pos, offset = 0, first_offset
    for header in headers:
        _I64.pack_into(records, pos, offset)
        _I32.pack_into(records, pos + 12, leader_epoch)
        attributes, max_timestamp = header.attributes, header.max_timestamp
        if log_append_time_ms is not None:
            attributes |= TIMESTAMP_TYPE_MASK
            max_timestamp = log_append_time_ms
            struct.pack_into(">h", records, pos + ATTRIBUTES_OFFSET, attributes)
            _I64.pack_into(records, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
            crc = compute_crc(memoryview(records)[pos : pos + header.size])
            _U32.pack_into(records, pos + CRC_OFFSET, crc)
        else:
            crc = header.crc
        patched.append(
            BatchHeader(
                offset,
                header.batch_length,
                leader_epoch,
                header.magic,
                crc,
                attributes,
                header.last_offset_delta,
                header.base_timestamp,
                max_timestamp,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.records_count,
            )
        )
        offset += header.last_offset_delta + 1
        pos += header.size
    return patched
