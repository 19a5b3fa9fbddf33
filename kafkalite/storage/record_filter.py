"""Filter the batches a read returned down to the records a predicate keeps (views).

Each batch keeps its place and offsets: a batch whose records all match is sent as stored;
one where some match is re-encoded with only those (same codec, base offset, last offset
delta, producer and timestamps; new CRC), so the records keep their source offsets and the
gaps read like a compacted topic's; one where none match becomes an empty batch (records
count 0) still covering its offsets, as Kafka's cleaner keeps empty batches, so a consumer
advances past a range with no match. Control batches (transaction markers) are kept whole:
read_committed consumers need them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkalite.storage.batch import iter_batches
from kafkalite.storage.records import decode_records, encode_record_batch

# (key, headers) -> keep the record?
RecordPredicate = Callable[[bytes | None, Sequence[tuple[str, bytes | None]]], bool]


@dataclass(slots=True)
class FilterStats:
    """What filtering one read did: records looked at and kept, bytes in and out."""

    records_read: int = 0
    records_matched: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


def filter_batches(
    records: bytes, keep: RecordPredicate, stats: FilterStats | None = None
) -> bytes:
    """The batches of `records` with only the records `keep` accepts (see module doc)."""
    if not records:
        return records
    view = memoryview(records)
    out = bytearray()
    for pos, header in iter_batches(view):
        batch = view[pos : pos + header.size]
        if header.is_control:
            out += batch
            continue
        decoded = decode_records(batch)
        kept = [r for r in decoded if keep(r.key, r.headers)]
        if stats is not None:
            stats.records_read += len(decoded)
            stats.records_matched += len(kept)
        if len(kept) == len(decoded):
            out += batch
            continue
        out += encode_record_batch(
            kept,
            base_offset=header.base_offset,
            base_timestamp=header.base_timestamp,
            max_timestamp=header.max_timestamp,
            last_offset_delta=header.last_offset_delta,
            partition_leader_epoch=header.partition_leader_epoch,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            attributes=header.attributes,
            compression=header.compression if kept else 0,
        )
    if stats is not None:
        stats.bytes_in += len(records)
        stats.bytes_out += len(out)
    return bytes(out)
