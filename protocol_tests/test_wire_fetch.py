"""Fetch (key 1), ListOffsets (key 2) and OffsetForLeaderEpoch (key 23) on the wire."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from protocol_tests.batches import Record, build_batch, decode_records, simple_batch
from protocol_tests.raw_client import (
    RawClient,
    create_topics_request,
    fetch_request,
    list_offsets_request,
    offset_for_leader_epoch_request,
    produce_request,
    response_class,
    unique_name,
)

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3

NewTopic = Callable[..., tuple[str, uuid.UUID]]


def _produce(client: RawClient, topic: str, records: bytes) -> int:
    response = client.request(produce_request(topic, 0, records))
    part = response.responses[0].partition_responses[0]
    assert part.error_code == NONE
    return part.base_offset


def _fetch_partition(client: RawClient, request: object) -> object:
    response = client.request(request)
    assert getattr(response, "error_code", NONE) == NONE  # top-level error_code from v7
    (topic,) = response.responses
    (part,) = topic.partitions
    return part


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12])
def test_fetch_by_name_every_version(client: RawClient, new_topic: NewTopic, version: int) -> None:
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(3, b"x"))
    _produce(client, topic, simple_batch(2, b"y"))
    part = _fetch_partition(client, fetch_request(topic, 0, 0, version=version))
    assert part.error_code == NONE
    assert part.high_watermark == 5
    values = [r.value for r in decode_records(part.records)]
    assert values == [b"x-0", b"x-1", b"x-2", b"y-0", b"y-1"]
    # From the middle of the second batch: the whole batch comes back (Kafka semantics).
    part = _fetch_partition(client, fetch_request(topic, 0, 4, version=version))
    assert [r.offset for r in decode_records(part.records)] == [3, 4]


@pytest.mark.parametrize("version", [13, 15, 16])
def test_fetch_by_topic_id(client: RawClient, new_topic: NewTopic, version: int) -> None:
    topic, topic_id = new_topic()
    _produce(client, topic, simple_batch(2))
    request = fetch_request(None, 0, 0, version=version, topic_id=topic_id)
    response = client.request(request)
    (fetched,) = response.responses
    assert fetched.topic_id == topic_id
    (part,) = fetched.partitions
    assert part.error_code == NONE
    assert [r.offset for r in decode_records(part.records)] == [0, 1]


@pytest.mark.parametrize("version", [13, 16])
def test_fetch_unknown_topic_id(client: RawClient, version: int) -> None:
    unknown = uuid.uuid4()
    response = client.request(fetch_request(None, 0, 0, version=version, topic_id=unknown))
    (fetched,) = response.responses
    assert fetched.topic_id == unknown
    (part,) = fetched.partitions
    assert part.error_code == UNKNOWN_TOPIC_ID


def test_fetch_unknown_topic_name(client: RawClient) -> None:
    part = _fetch_partition(client, fetch_request("no-such-topic-xyz", 0, 0))
    assert part.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_offset_out_of_range(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(2))
    part = _fetch_partition(client, fetch_request(topic, 0, 50))
    assert part.error_code == OFFSET_OUT_OF_RANGE
    # As Kafka: a partition with an error reports no offsets.
    assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (-1, -1, -1)


def test_fetch_partition_max_bytes_returns_first_batch_whole(
    client: RawClient, new_topic: NewTopic
) -> None:
    """KIP-74: the first batch comes back whole even when larger than the limits."""
    topic, _ = new_topic()
    _produce(client, topic, build_batch([Record(b"k", b"v" * 5000)]))
    _produce(client, topic, build_batch([Record(b"k", b"w" * 5000)]))
    request = fetch_request(topic, 0, 0, max_bytes=100, partition_max_bytes=100)
    part = _fetch_partition(client, request)
    records = decode_records(part.records)
    assert [r.offset for r in records] == [0]
    assert records[0].value == b"v" * 5000


def test_long_poll_returns_when_data_arrives(
    client: RawClient, connect: Callable[..., RawClient], new_topic: NewTopic
) -> None:
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(1, b"before"))
    max_wait_ms = 5000
    started = time.monotonic()
    cid = client.send(fetch_request(topic, 0, 1, max_wait_ms=max_wait_ms, min_bytes=1))
    # The fetch is parked: nothing comes back while no data arrives.
    assert not client.readable_within(0.5), "long poll answered before any data arrived"
    producer = connect()
    _produce(producer, topic, simple_batch(2, b"after"))
    got, response = client.recv(response_class(1, 12))
    elapsed = time.monotonic() - started
    assert got == cid
    part = response.responses[0].partitions[0]
    assert part.error_code == NONE
    assert [r.value for r in decode_records(part.records)] == [b"after-0", b"after-1"]
    assert elapsed < 0.5 + 2.0, f"long poll took {elapsed:.2f}s after data arrived"


def test_long_poll_times_out_without_data(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(1))
    max_wait_ms = 5000
    started = time.monotonic()
    part = _fetch_partition(
        client, fetch_request(topic, 0, 1, max_wait_ms=max_wait_ms, min_bytes=1)
    )
    elapsed = time.monotonic() - started
    assert part.error_code == NONE
    assert not part.records
    assert max_wait_ms / 1000 - 0.3 <= elapsed < max_wait_ms / 1000 + 3.0, elapsed


def test_long_poll_min_bytes_satisfied_immediately(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(3))
    started = time.monotonic()
    part = _fetch_partition(client, fetch_request(topic, 0, 0, max_wait_ms=5000, min_bytes=1))
    assert len(decode_records(part.records)) == 3
    assert time.monotonic() - started < 2.0


# -- ListOffsets -------------------------------------------------------------------------------


def _list_offset(client: RawClient, topic: str, timestamp: int, version: int = 7) -> tuple:
    response = client.request(list_offsets_request(topic, 0, timestamp, version=version))
    (part,) = response.topics[0].partitions
    return part.error_code, part.offset, part.timestamp


@pytest.mark.parametrize("version", [1, 4, 7, 8, 9])
def test_list_offsets_earliest_latest(client: RawClient, new_topic: NewTopic, version: int) -> None:
    topic, _ = new_topic()
    assert _list_offset(client, topic, EARLIEST, version)[:2] == (NONE, 0)
    assert _list_offset(client, topic, LATEST, version)[:2] == (NONE, 0)
    _produce(client, topic, simple_batch(4))
    assert _list_offset(client, topic, EARLIEST, version)[:2] == (NONE, 0)
    assert _list_offset(client, topic, LATEST, version)[:2] == (NONE, 4)


def test_list_offsets_by_timestamp_within_one_batch(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    base = 1_700_000_000_000
    stamps = [base, base + 10, base + 20, base + 50, base + 30]
    _produce(client, topic, build_batch([Record(b"k", b"v", (), ts) for ts in stamps]))
    assert _list_offset(client, topic, base - 1) == (NONE, 0, base)
    assert _list_offset(client, topic, base + 10) == (NONE, 1, base + 10)
    assert _list_offset(client, topic, base + 11) == (NONE, 2, base + 20)
    # The first record whose timestamp is >= the target, in offset order: offset 3 (base+50).
    assert _list_offset(client, topic, base + 25) == (NONE, 3, base + 50)
    assert _list_offset(client, topic, base + 51)[:2] == (NONE, -1)
    assert _list_offset(client, topic, MAX_TIMESTAMP) == (NONE, 3, base + 50)


def test_list_offsets_unknown_partition(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    response = client.request(list_offsets_request(topic, 9, LATEST))
    assert response.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(client: RawClient, new_topic: NewTopic, version: int) -> None:
    """v2 is not advertised (Kafka 4 advertises 3-4) but librdkafka sends it: answered."""
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(3))
    response = client.request(offset_for_leader_epoch_request(topic, 0, 0, version=version))
    (result,) = response.topics[0].partitions
    assert result.error_code == NONE
    assert (result.leader_epoch, result.end_offset) == (0, 3)
    response = client.request(offset_for_leader_epoch_request(topic, 5, 0, version=version))
    assert response.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_long_poll_waits_for_min_bytes(
    client: RawClient, connect: Callable[..., RawClient], new_topic: NewTopic
) -> None:
    """Data below min_bytes does not end the wait; enough data does, before max_wait."""
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(1, b"small"))
    started = time.monotonic()
    cid = client.send(fetch_request(topic, 0, 0, max_wait_ms=5000, min_bytes=3000))
    assert not client.readable_within(0.5), "answered with fewer than min_bytes"
    producer = connect()
    _produce(producer, topic, build_batch([Record(b"k", b"x" * 4000)]))
    got, response = client.recv(response_class(1, 12))
    assert got == cid
    assert time.monotonic() - started < 0.5 + 2.0
    records = decode_records(response.responses[0].partitions[0].records)
    assert [r.offset for r in records] == [0, 1]


def test_fetch_max_bytes_across_partitions(client: RawClient) -> None:
    """The response-wide max_bytes: the first batch always comes back (KIP-74), later
    partitions get only what still fits (a partial trailing batch, as Kafka may send, is
    not a record)."""
    topic = unique_name("multi")
    assert client.request(create_topics_request(topic, partitions=2)).topics[0].error_code == 0
    for partition in (0, 1):
        batch = build_batch([Record(b"k", b"p%d" % partition + b"x" * 5000)])
        response = client.request(produce_request(topic, partition, batch))
        assert response.responses[0].partition_responses[0].error_code == NONE

    def counts(max_bytes: int) -> list[int]:
        request = fetch_request(
            topic, (0, 1), 0, max_bytes=max_bytes, partition_max_bytes=1_000_000
        )
        parts = client.request(request).responses[0].partitions
        return [
            len(decode_records(p.records)) for p in sorted(parts, key=lambda p: p.partition_index)
        ]

    assert counts(100) == [1, 0]
    assert counts(7_000) == [1, 0]
    assert counts(20_000) == [1, 1]
