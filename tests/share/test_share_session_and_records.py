"""Share sessions (epochs, limit) and the `__share_group_state` records (Kafka's format)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.coordinator.records import InvalidRecord
from kafkalite.share.share_partition import StateBatch
from kafkalite.share.share_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareState,
    ShareUpdate,
    apply_update,
    decode_key,
    decode_snapshot,
    decode_update,
    snapshot_record,
    update_record,
)
from kafkalite.share.share_session import ShareSessionCache, next_epoch

TP = (uuid.UUID(int=1), 0)
KEY = SharePartitionKey("g", uuid.UUID(int=1), 3)  # Kafka's Uuid(0, 1)


def test_session_epochs_follow_one_another() -> None:
    cache = ShareSessionCache(max_sessions=1)
    assert cache.open(("g", "m1"), [TP])[0] is ErrorCode.none
    assert cache.open(("g", "m2"), [TP])[0] is ErrorCode.share_session_limit_reached
    assert cache.advance(("g", "m1"), 2)[0] is ErrorCode.invalid_share_session_epoch
    error, session = cache.advance(("g", "m1"), 1, forgotten=[TP])
    assert error is ErrorCode.none and session is not None
    assert (session.epoch, list(session.partitions)) == (2, [])
    assert cache.advance(("g", "m2"), 1)[0] is ErrorCode.share_session_not_found
    assert cache.close(("g", "m1")) is session
    assert next_epoch(2**31 - 1) == 1


# Written by Kafka 4.4's generated classes (MessageUtil.toCoordinatorTypePrefixedBytes and
# toVersionPrefixedBytes) for the same values: group "g", topic id 0:1, partition 3.
KAFKA_SNAPSHOT_KEY = "00000001670000000000000000000000000000000100000003"
KAFKA_UPDATE_KEY = "00010001670000000000000000000000000000000100000003"
KAFKA_SNAPSHOT_VALUE = (
    "0000000000010000000000000005000000000000006400000000000003e800000000000007d002"
    "0000000000000064000000000000006d0200010000"
)
KAFKA_UPDATE_VALUE = (
    "00000000000100000005000000000000006602000000000000006700000000000000670200010000"
)


def test_records_are_byte_exact_with_kafka() -> None:
    state = ShareState(1, 0, 5, 100, (StateBatch(100, 109, 2, 1),), 1000, 2000)
    key, value = snapshot_record(KEY, state)
    assert (key.hex(), value.hex()) == (KAFKA_SNAPSHOT_KEY, KAFKA_SNAPSHOT_VALUE)
    assert decode_key(key) == (SHARE_SNAPSHOT, KEY)
    assert decode_snapshot(value) == state
    update = ShareUpdate(1, 5, 102, (StateBatch(103, 103, 2, 1),))
    key, value = update_record(KEY, update)
    assert (key.hex(), value.hex()) == (KAFKA_UPDATE_KEY, KAFKA_UPDATE_VALUE)
    assert decode_key(key) == (SHARE_UPDATE, KEY)
    assert decode_update(value) == update


def test_update_overlays_the_snapshot() -> None:
    state = ShareState(0, 0, 0, 100, (StateBatch(100, 104, 0, 1),))
    update = ShareUpdate(0, 0, 102, (StateBatch(103, 103, 2, 1), StateBatch(105, 105, 4, 2)))
    merged = apply_update(state, update)
    assert merged.start_offset == 102
    assert merged.batches == (
        StateBatch(102, 102, 0, 1),
        StateBatch(103, 103, 2, 1),
        StateBatch(104, 104, 0, 1),
        StateBatch(105, 105, 4, 2),
    )


def test_corrupt_records_are_refused() -> None:
    with pytest.raises(InvalidRecord):
        decode_key(b"\x00\x07")
    with pytest.raises(InvalidRecord):
        decode_snapshot(b"\x00\x01")


def test_coordinator_key_names_the_topic_as_kafka_prints_a_uuid() -> None:
    # Kafka's Uuid(0, 1).toString(), and a group id with a colon in it.
    key = SharePartitionKey("a:b", uuid.UUID(int=1), 3)
    assert key.coordinator_key() == "a:b:AAAAAAAAAAAAAAAAAAAAAQ:3"
    assert SharePartitionKey.parse(key.coordinator_key()) == key
    assert SharePartitionKey.parse(f"g:{uuid.UUID(int=1)}:3") is None
    assert SharePartitionKey.parse("g:AAAAAAAAAAAAAAAAAAAAAQ:x") is None
