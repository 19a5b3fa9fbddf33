"""Control batches: the commit/abort markers a transaction coordinator writes (Kafka's
EndTransactionMarker). A control batch is transactional and carries one record whose key
is (version int16 0, type int16: 0 ABORT, 1 COMMIT) and whose value is (version int16 0,
coordinator epoch int32)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalite.storage.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader
from kafkalite.storage.records import decode_records, encode_batch

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
MARKER_VERSION = 0


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


def encode_marker(
    producer_id: int, producer_epoch: int, marker: EndTxnMarker, timestamp: int
) -> bytes:
    key = _KEY.pack(MARKER_VERSION, COMMIT if marker.commit else ABORT)
    value = _VALUE.pack(MARKER_VERSION, marker.coordinator_epoch)
    return encode_batch(
        [(key, value)],
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG,
    )


def decode_marker(batch: bytes | memoryview) -> EndTxnMarker | None:
    """The marker in a control batch; None for other control records (e.g. KRaft's)."""
    records = decode_records(batch)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        return None
    _, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    value = records[0].value or b""
    epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return EndTxnMarker(kind == COMMIT, epoch)


def is_marker_header(header: BatchHeader) -> bool:
    return header.is_control and header.is_transactional
