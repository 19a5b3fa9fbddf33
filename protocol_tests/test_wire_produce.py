"""Produce (key 0) on the wire: success, legacy versions, and every rejection Kafka makes."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

import pytest

from protocol_tests.batches import (
    Record,
    build_batch,
    build_magic_v1_message_set,
    decode_records,
    simple_batch,
    with_bad_crc,
)
from protocol_tests.raw_client import (
    MESSAGE_MAX_BYTES,
    RawClient,
    fetch_request,
    list_offsets_request,
    log_end,
    metadata_request,
    produce_request,
    unique_name,
)

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87
UNKNOWN_TOPIC_ID = 100
LATEST = -1

NewTopic = Callable[..., tuple[str, object]]


def _produce(client: RawClient, topic: str, records: bytes, partition: int = 0, **kw) -> object:
    response = client.request(produce_request(topic, partition, records, **kw))
    (topic_response,) = response.responses
    assert topic_response.name == topic
    (partition_response,) = topic_response.partition_responses
    assert partition_response.index == partition
    return partition_response


def test_produce_then_fetch_round_trip(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    first = _produce(client, topic, simple_batch(3, b"a"))
    assert (first.error_code, first.base_offset) == (NONE, 0)
    second = _produce(client, topic, simple_batch(2, b"b"))
    assert (second.error_code, second.base_offset) == (NONE, 3)
    assert second.log_start_offset == 0
    assert log_end(client, topic) == 5
    response = client.request(fetch_request(topic, 0, 0))
    part = response.responses[0].partitions[0]
    assert part.error_code == NONE
    assert part.high_watermark == 5
    records = decode_records(part.records)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    assert [r.value for r in records] == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"]
    assert [r.key for r in records] == [b"k0", b"k1", b"k2", b"k0", b"k1"]


def test_produce_keeps_record_fields(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    records = [
        Record(key=None, value=None, headers=(), timestamp=1_600_000_000_000),
        Record(
            key=b"key",
            value=b"",
            headers=(("a", b"1"), ("a", b"2"), ("null", None)),
            timestamp=1_600_000_000_123,
        ),
        Record(key=b"\x00\xff", value=bytes(range(256)), timestamp=1_599_999_999_000),
    ]
    assert _produce(client, topic, build_batch(records)).error_code == NONE
    part = client.request(fetch_request(topic, 0, 0)).responses[0].partitions[0]
    fetched = decode_records(part.records)
    assert [(r.key, r.value, r.timestamp) for r in fetched] == [
        (r.key, r.value, r.timestamp) for r in records
    ]
    assert fetched[1].headers == [("a", b"1"), ("a", b"2"), ("null", None)]


# -- legacy versions -------------------------------------------------------------------------


def _legacy_produce_frame(version: int, correlation_id: int, topics: dict[str, list[int]]) -> bytes:
    """Produce v0-v2 (request header v1), written by hand: kio has no schema for them."""
    client_id = b"legacy"
    frame = struct.pack(">hhih", 0, version, correlation_id, len(client_id)) + client_id
    frame += struct.pack(">hi", -1, 10_000)  # acks, timeout
    frame += struct.pack(">i", len(topics))
    for name, partitions in topics.items():
        raw = name.encode()
        frame += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(partitions))
        for partition in partitions:
            message_set = build_magic_v1_message_set(b"k", b"legacy value")
            frame += struct.pack(">ii", partition, len(message_set)) + message_set
    return frame


def _parse_legacy_produce_response(version: int, frame: bytes) -> tuple[int, dict]:
    pos = 0

    def take(fmt: str) -> tuple:
        nonlocal pos
        values = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return values

    (correlation_id,) = take(">i")
    result: dict[str, dict[int, tuple[int, int]]] = {}
    (topic_count,) = take(">i")
    for _ in range(topic_count):
        (length,) = take(">h")
        name = frame[pos : pos + length].decode()
        pos += length
        (partition_count,) = take(">i")
        for _ in range(partition_count):
            partition, error, base_offset = take(">ihq")
            if version >= 2:
                take(">q")  # log append time
            result.setdefault(name, {})[partition] = (error, base_offset)
    if version >= 1:
        take(">i")  # throttle time
    assert pos == len(frame), f"{len(frame) - pos} trailing bytes in produce v{version} response"
    return correlation_id, result


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_legacy_versions_refused_per_partition(
    client: RawClient, new_topic: NewTopic, version: int
) -> None:
    """Kafka 4 answers Produce v0-v2 with UNSUPPORTED_VERSION for every partition."""
    topic, _ = new_topic()
    other = unique_name("legacy-missing")
    client.send_frame(_legacy_produce_frame(version, 4242, {topic: [0, 1], other: [0]}))
    correlation_id, result = _parse_legacy_produce_response(version, client.recv_frame())
    assert correlation_id == 4242
    assert result == {
        topic: {0: (UNSUPPORTED_VERSION, -1), 1: (UNSUPPORTED_VERSION, -1)},
        other: {0: (UNSUPPORTED_VERSION, -1)},
    }
    assert log_end(client, topic) == 0, "a refused legacy produce wrote data"


# -- rejected batches -------------------------------------------------------------------------


def test_produce_bad_crc_is_corrupt_message(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    assert _produce(client, topic, simple_batch(2)).error_code == NONE
    response = _produce(client, topic, with_bad_crc(simple_batch(3)))
    assert response.error_code == CORRUPT_MESSAGE
    assert response.base_offset == -1
    assert log_end(client, topic) == 2
    # The partition still takes good batches at the right offset.
    assert _produce(client, topic, simple_batch(1)).base_offset == 2


def test_produce_magic_v1_batch_is_invalid_record(client: RawClient, new_topic: NewTopic) -> None:
    """Kafka 4 (ProduceRequest.validateRecords): Produce v3+ must carry magic v2 batches,
    else InvalidRecordException -> INVALID_RECORD (87)."""
    topic, _ = new_topic()
    response = _produce(client, topic, build_magic_v1_message_set(b"k", b"v"))
    assert response.error_code == INVALID_RECORD
    assert log_end(client, topic) == 0


def test_produce_two_batches_in_one_partition_is_invalid_record(
    client: RawClient, new_topic: NewTopic
) -> None:
    """Kafka 4 (ProduceRequest.validateRecords): 'Produce requests with version N are only
    allowed to contain exactly one record batch per partition' -> INVALID_RECORD."""
    topic, _ = new_topic()
    records = simple_batch(1, b"one") + simple_batch(1, b"two")
    response = _produce(client, topic, records)
    assert response.error_code == INVALID_RECORD
    assert log_end(client, topic) == 0


def test_produce_unknown_compression_codec_is_refused(
    client: RawClient, new_topic: NewTopic
) -> None:
    """Codec ids 5-7 do not exist: the batch is refused and nothing is appended."""
    topic, _ = new_topic()
    response = _produce(client, topic, build_batch([Record(b"k", b"v")], attributes=5))
    assert response.error_code != NONE
    assert response.base_offset == -1
    assert log_end(client, topic) == 0


def test_produce_oversized_batch_is_message_too_large(
    client: RawClient, new_topic: NewTopic
) -> None:
    topic, _ = new_topic()
    big = build_batch([Record(key=b"k", value=b"x" * (MESSAGE_MAX_BYTES + 1000))])
    response = _produce(client, topic, big)
    assert response.error_code == MESSAGE_TOO_LARGE
    assert log_end(client, topic) == 0
    # Just under the limit is fine.
    fits = build_batch([Record(key=b"k", value=b"x" * (MESSAGE_MAX_BYTES - 200))])
    assert len(fits) <= MESSAGE_MAX_BYTES
    assert _produce(client, topic, fits).error_code == NONE


def test_produce_empty_records_is_invalid_record(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    assert _produce(client, topic, b"").error_code == INVALID_RECORD


def test_produce_invalid_acks(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    response = _produce(client, topic, simple_batch(1), acks=2)
    assert response.error_code == INVALID_REQUIRED_ACKS
    assert log_end(client, topic) == 0


def test_produce_unknown_partition(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    response = _produce(client, topic, simple_batch(1), partition=7)
    assert response.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_produce_unknown_topic_is_not_auto_created(client: RawClient) -> None:
    """Produce never creates topics (only Metadata does), even with auto-create on."""
    topic = unique_name("produce-missing")
    response = _produce(client, topic, simple_batch(1))
    assert response.error_code == UNKNOWN_TOPIC_OR_PARTITION
    metadata = client.request(metadata_request([topic], auto_create=False))
    assert metadata.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_produce_acks_zero_sends_no_response(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    client.send(produce_request(topic, 0, simple_batch(2), acks=0))
    # The next response on the connection answers the next request: none for acks=0.
    response = client.request(list_offsets_request(topic, 0, LATEST))
    assert response.topics[0].partitions[0].offset == 2


def test_produce_v13_names_topics_by_id(client: RawClient, new_topic: NewTopic) -> None:
    topic, topic_id = new_topic()
    request = produce_request(topic, 0, simple_batch(2), version=13, topic_id=topic_id)
    (topic_response,) = client.request(request).responses
    assert topic_response.topic_id == topic_id
    (part,) = topic_response.partition_responses
    assert (part.error_code, part.base_offset) == (NONE, 0)
    assert log_end(client, topic) == 2


def test_produce_v13_unknown_topic_id(client: RawClient) -> None:
    unknown = uuid.uuid4()
    request = produce_request("", 0, simple_batch(1), version=13, topic_id=unknown)
    (topic_response,) = client.request(request).responses
    assert topic_response.topic_id == unknown
    assert topic_response.partition_responses[0].error_code == UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", [3, 5, 7, 9, 10, 11, 12])
def test_produce_every_served_version(client: RawClient, new_topic: NewTopic, version: int) -> None:
    topic, _ = new_topic()
    response = _produce(client, topic, simple_batch(2), version=version)
    assert (response.error_code, response.base_offset) == (NONE, 0)
    assert log_end(client, topic) == 2


def test_fetch_out_of_range(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    _produce(client, topic, simple_batch(3))
    for offset in (4, 1000):
        part = client.request(fetch_request(topic, 0, offset)).responses[0].partitions[0]
        assert part.error_code == OFFSET_OUT_OF_RANGE, offset
    # Fetching exactly at the log end is not out of range: it is simply empty.
    part = client.request(fetch_request(topic, 0, 3)).responses[0].partitions[0]
    assert part.error_code == NONE
    assert not part.records
