"""Record batches for storage tests: `make_batch`, a storage-flavoured front end to the
project's one test encoder in protocol_tests/batches.py."""

from __future__ import annotations

from collections.abc import Sequence

from protocol_tests.batches import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    SNAPPY_RAW,
    ZSTD,
    Record,
    build_batch,
)

__all__ = ["GZIP", "LZ4", "NONE", "SNAPPY", "SNAPPY_RAW", "ZSTD", "Record", "make_batch"]

LOG_APPEND_TIME, TRANSACTIONAL, CONTROL = 0x08, 0x10, 0x20


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
    attributes = (
        (LOG_APPEND_TIME if log_append_time else 0)
        | (TRANSACTIONAL if transactional else 0)
        | (CONTROL if control else 0)
    )
    return build_batch(
        list(records),
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
        attributes=attributes,
        compression=compression,
    )
