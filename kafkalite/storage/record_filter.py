"""Filter the batches a read returned down to the records a predicate keeps (views).

Each batch keeps its place and offsets: a batch whose records all match is sent as stored;
one where some match is re-framed with only those (same codec, base offset, last offset
delta, producer and timestamps; new count, length and CRC), so the records keep their source
offsets and the gaps read like a compacted topic's; one where none match becomes an empty
batch (records count 0) still covering its offsets, as Kafka's cleaner keeps empty batches,
so a consumer advances past a range with no match. Control batches (transaction markers)
are kept whole: read_committed consumers need them.

Records are not decoded: a scan reads each record's key and the headers the predicate names,
and the matching records' bytes are copied as they are (their offset and timestamp deltas
are relative to the batch's base, which does not change).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from kafkalite.storage.batch import HEADER_SIZE, iter_batches
from kafkalite.storage.errors import CorruptRecordError
from kafkalite.storage.records import NONE, decompress, frame_batch

HeaderValues = dict[bytes, bytes | None]


class RecordMatcher(Protocol):
    """What decides a record: it reads the key and the headers named in `header_names`."""

    @property
    def header_names(self) -> frozenset[bytes]: ...

    def match(self, key: bytes | None, headers: HeaderValues) -> bool: ...


@dataclass(slots=True)
class FilterStats:
    """What filtering did so far: records looked at and kept, bytes in and out."""

    records_read: int = 0
    records_matched: int = 0  # sent, whole batches by the index included
    bytes_in: int = 0  # read and filtered
    bytes_out: int = 0  # what filtering those returned
    batches_skipped: int = 0  # ruled out by a header index: not read at all
    bytes_skipped: int = 0
    batches_whole: int = 0  # matched whole by a header index: sent without a scan
    bytes_read: int = 0  # from the log: batches, and to build header indexes
    bytes_served: int = 0  # answered to consumers


def filter_batches(
    records: bytes, matcher: RecordMatcher, stats: FilterStats | None = None
) -> bytes:
    """The batches of `records` with only the records `matcher` accepts (see module doc)."""
    if not records:
        return records
    view = memoryview(records)
    out = bytearray()
    read = matched = 0
    for pos, header in iter_batches(view):
        batch = view[pos : pos + header.size]
        if header.is_control:
            out += batch
            continue
        payload = decompress(header.compression, batch[HEADER_SIZE:])
        kept = _matching(payload, header.records_count, matcher)
        read += header.records_count
        matched += len(kept)
        if len(kept) == header.records_count:
            out += batch
        elif kept:
            body = b"".join(payload[start:end] for start, end in kept)
            out += frame_batch(header, body, len(kept), header.compression)
        else:
            out += frame_batch(header, b"", 0, NONE)
    if stats is not None:
        stats.records_read += read
        stats.records_matched += matched
        stats.bytes_in += len(records)
        stats.bytes_out += len(out)
    return bytes(out)


def _matching(payload: bytes, count: int, matcher: RecordMatcher) -> list[tuple[int, int]]:
    """(start, end) in `payload` of each record `matcher` keeps, length prefix included."""
    match, names = matcher.match, matcher.header_names
    try:
        return [
            (s, e)
            for s, e, key, values in scan_records(payload, count, names)
            if match(key, values)
        ]
    except IndexError as exc:
        raise CorruptRecordError("record data ends inside a record") from exc


def scan_records(
    data: bytes, count: int, names: frozenset[bytes]
) -> Iterator[tuple[int, int, bytes | None, HeaderValues]]:
    """Each record's (start, end, key, values of the headers in `names`).

    Record: length varint, attributes i8, timestampDelta varlong, offsetDelta varint, key,
    value, header count, headers (name, value); varints zigzag-encoded. The one-byte varint
    (lengths below 64) is read inline: this loop runs once per record of a view's reads."""
    varint, skip = _varint, _skip_varint
    pos = 0
    for _ in range(count):
        start = pos
        length, pos = varint(data, pos)
        end = pos + length
        pos = skip(data, skip(data, pos + 1))  # attributes, timestamp and offset deltas
        byte = data[pos]
        if byte < 0x80:
            size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            size, pos = varint(data, pos)
        if size >= 0:
            key: bytes | None = data[pos : pos + size]
            pos += size
        else:
            key = None
        byte = data[pos]
        if byte < 0x80:
            size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            size, pos = varint(data, pos)
        if size > 0:
            pos += size  # the value: never read
        headers = data[pos]
        values: HeaderValues = {}
        if headers < 0x80:
            headers, pos = headers >> 1, pos + 1
        else:
            headers, pos = varint(data, pos)
        for _ in range(headers):
            size, pos = varint(data, pos)
            name = data[pos : pos + size]
            size, pos = varint(data, pos + size)
            if name in names:
                values[name] = data[pos : pos + size] if size >= 0 else None
            if size > 0:
                pos += size
        if end > len(data):
            raise IndexError(end)
        yield start, end, key, values
        pos = end


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint at `pos` -> (value, next position); one byte is the common case."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    raw, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + 1
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")


def _skip_varint(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def predicate_matcher(
    keep: Callable[[bytes | None, HeaderValues], bool], header_names: frozenset[bytes]
) -> RecordMatcher:
    """A matcher from a plain function (tests, and callers without a filter object)."""
    return _FunctionMatcher(keep, header_names)


@dataclass(frozen=True, slots=True)
class _FunctionMatcher:
    keep: Callable[[bytes | None, HeaderValues], bool]
    header_names: frozenset[bytes]

    def match(self, key: bytes | None, headers: HeaderValues) -> bool:
        return self.keep(key, headers)
