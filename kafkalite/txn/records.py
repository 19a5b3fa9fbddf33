"""`__transaction_state` records in Kafka's format (TransactionLogKey / TransactionLogValue
version 0): key = (version int16 0, transactional id string); value = (version int16 0,
producer id int64, producer epoch int16, timeout int32, status int8, partitions (topic,
[partition]) array, last update int64, start int64). A null value is a tombstone.
"""

from __future__ import annotations

import struct

from kafkalite.txn.coordinator import TxnMetadata, TxnState

KEY_VERSION = VALUE_VERSION = 0
STATUS = {
    TxnState.EMPTY: 0,
    TxnState.ONGOING: 1,
    TxnState.PREPARE_COMMIT: 2,
    TxnState.PREPARE_ABORT: 3,
    TxnState.COMPLETE_COMMIT: 4,
    TxnState.COMPLETE_ABORT: 5,
    TxnState.DEAD: 6,
    TxnState.PREPARE_EPOCH_FENCE: 7,
}
STATE_OF = {code: state for state, code in STATUS.items()}
_HEAD = struct.Struct(">hqhib")
_TAIL = struct.Struct(">qq")


class InvalidTxnRecord(ValueError):
    pass


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def decode_key(key: bytes) -> str:
    (version,) = struct.unpack_from(">h", key)
    if version != KEY_VERSION:
        raise InvalidTxnRecord(f"unknown key version {version}")
    (length,) = struct.unpack_from(">h", key, 2)
    return key[4 : 4 + length].decode()


def encode_value(meta: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [
        _HEAD.pack(
            VALUE_VERSION,
            meta.producer_id,
            meta.producer_epoch,
            meta.timeout_ms,
            STATUS[meta.state],
        ),
        struct.pack(">i", len(by_topic)),
    ]
    for topic, partitions in by_topic.items():
        parts.append(_string(topic))
        parts.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    parts.append(_TAIL.pack(meta.last_update_ms, meta.txn_start_ms))
    return b"".join(parts)


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    try:
        version, producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(value)
        if version > 1:
            raise InvalidTxnRecord(f"unknown value version {version}")
        if version == 1:
            raise InvalidTxnRecord("flexible (version 1) values are not read yet")
        pos = _HEAD.size
        (topics,) = struct.unpack_from(">i", value, pos)
        pos += 4
        partitions: set[tuple[str, int]] = set()
        for _ in range(max(topics, 0)):
            (length,) = struct.unpack_from(">h", value, pos)
            topic = value[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (count,) = struct.unpack_from(">i", value, pos)
            indexes = struct.unpack_from(f">{count}i", value, pos + 4)
            pos += 4 + 4 * count
            partitions.update((topic, index) for index in indexes)
        last_update, start = _TAIL.unpack_from(value, pos)
    except struct.error as exc:
        raise InvalidTxnRecord(str(exc)) from exc
    return TxnMetadata(
        transactional_id,
        producer_id,
        epoch,
        timeout_ms,
        STATE_OF[status],
        partitions=partitions,
        txn_start_ms=start,
        last_update_ms=last_update,
    )
