"""Produce/consume round trips, the same on kafkalite and Apache Kafka: every codec, keys,
null keys and values, headers (duplicate names, binary and null values), messages at and just
over the size limit, keyed partitioning, CreateTime timestamps, acks 0/1/all and the order
within a partition."""

from __future__ import annotations

import random
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

from compat.scenario_helpers import (
    broker_config,
    consume_all,
    create_topic,
    offsets_for_times,
    produce,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    stored_batches,
    wait_until,
    watermarks,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000
# Overhead of a v2 record batch holding one record with a null key, no headers and a value of
# 16 KiB .. 2 MiB (three-byte varints): 61 bytes of batch header, 11 of record framing.
ONE_RECORD_OVERHEAD = 72


def _messages(seed: int, partitions: int, per_partition: int) -> list[dict[str, Any]]:
    """Keys, null keys, empty keys, null and empty values, headers with duplicate names,
    binary, empty and null values, explicit non-monotonic timestamps."""
    rng = random.Random(seed)
    words = [b"kafka", b"lite", b"broker", b"segment", b"offset", b"record"]
    messages = []
    for i in range(partitions * per_partition):
        size = rng.choice([0, 10, 100, 1000, 4000])
        # Compressible text with a random tail, so every codec really compresses (librdkafka
        # sends a batch uncompressed when compression would not make it smaller).
        value: bytes | None = (
            b"%05d:" % i
            + b" ".join(rng.choice(words) for _ in range(size // 6))
            + rng.randbytes(min(size, 16))
        )
        key: bytes | None = b"key-%d" % i
        headers: list[tuple[str, bytes | None]] = [
            ("idx", str(i).encode()),
            ("dup", b"first"),
            ("dup", b"second"),
        ]
        if i % 17 == 0:
            key = None
        if i % 19 == 1:
            key = b""
        if i % 23 == 5:
            value = None  # a tombstone
        if i % 29 == 7:
            value = b""
        if i % 11 == 3:
            headers += [("empty", b""), ("null", None), ("bin", bytes(range(256)))]
        if i % 13 == 4:
            headers = []
        if i % 31 == 9:
            headers.append(("ключ-ü", "значение".encode()))
        if i % 37 == 11:
            headers.append(("", b"a header with an empty name"))
        messages.append(
            {
                "key": key,
                "value": value,
                "partition": i % partitions,
                "headers": headers,
                "timestamp": BASE_TS + i * 7 - (i % 5) * 1000,  # not monotonic
            }
        )
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(target, topic_name: Callable[..., str], codec: str) -> None:
    partitions, per_partition = 3, 40
    topic = topic_name()
    create_topic(target.bootstrap, topic, partitions)
    messages = _messages(CODECS.index(codec), partitions, per_partition)
    prod = producer(target.bootstrap, **{"compression.type": codec, "linger.ms": 20, "acks": "all"})
    deliveries = produce_all(prod, topic, messages)
    offsets: dict[int, list[int]] = defaultdict(list)
    for d in deliveries.succeeded:
        offsets[d.partition].append(d.offset)
    assert {p: sorted(o) for p, o in offsets.items()} == {
        p: list(range(per_partition)) for p in range(partitions)
    }

    consumed = consume_all(target.bootstrap, topic, range(partitions), **{"check.crcs": True})
    for partition in range(partitions):
        expected = [m for m in messages if m["partition"] == partition]
        got = consumed[partition]
        assert [c.offset for c in got] == list(range(per_partition)), "gaps or duplicates"
        for want, have in zip(expected, got, strict=True):
            assert (have.key, have.value) == (want["key"], want["value"])
            assert list(have.headers) == want["headers"]
            assert (have.timestamp_type, have.timestamp) == (
                TIMESTAMP_CREATE_TIME,
                want["timestamp"],
            )


def test_producer_assigned_create_time(target, topic_name: Callable[..., str]) -> None:
    """Without an explicit timestamp the producer stamps CreateTime itself; the consumer
    reads the stamp the delivery report gave."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    before = int(time.time() * 1000)
    deliveries = produce_all(
        producer(target.bootstrap), topic, ({"value": b"%d" % i} for i in range(20))
    )
    after = int(time.time() * 1000)
    consumed = consume_all(target.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == [b"%d" % i for i in range(20)]
    for report, record in zip(deliveries.succeeded, consumed, strict=True):
        assert record.timestamp_type == TIMESTAMP_CREATE_TIME
        assert before - 1000 <= record.timestamp <= after + 1000
        assert report.timestamp == (TIMESTAMP_CREATE_TIME, record.timestamp)


def test_keyed_partitioning(target, topic_name: Callable[..., str]) -> None:
    """The default partitioner (consistent_random: CRC-32 of the key) sends a key to one
    partition; the consumer finds every message where its delivery report said, and a key's
    messages in production order."""
    partitions = 4
    topic = topic_name()
    create_topic(target.bootstrap, topic, partitions)
    keys = [b"user-%d" % k for k in range(24)]
    messages = [{"key": keys[i % len(keys)], "value": b"%04d" % i} for i in range(480)]
    deliveries = produce_all(producer(target.bootstrap, **{"linger.ms": 10}), topic, messages)
    where: dict[bytes, set[int]] = defaultdict(set)
    for d in deliveries.succeeded:
        where[d.key].add(d.partition)
    assert all(len(found) == 1 for found in where.values()), where
    assert {k: next(iter(p)) for k, p in where.items()} == {
        k: zlib.crc32(k) % partitions for k in keys
    }
    assert len({next(iter(p)) for p in where.values()}) == partitions, "a partition got no key"

    consumed = consume_all(target.bootstrap, topic, range(partitions))
    reported = {(d.partition, d.offset): d.value for d in deliveries.succeeded}
    seen = {(c.partition, c.offset): c.value for p in consumed.values() for c in p}
    assert seen == reported
    for key in keys:
        values = [c.value for p in consumed.values() for c in p if c.key == key]
        assert values == [m["value"] for m in messages if m["key"] == key]


def _max_bytes_case(target, topic_name, limit: int, topic_config: dict[str, str]) -> None:
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1, config=topic_config)
    prod = producer(
        target.bootstrap,
        **{"linger.ms": 0, "message.max.bytes": limit + 10_000, "compression.type": "none"},
    )
    rng = random.Random(limit)
    fits = rng.randbytes(limit - ONE_RECORD_OVERHEAD)
    too_big = rng.randbytes(limit - ONE_RECORD_OVERHEAD + 1)
    first = produce(prod, topic, [{"value": fits, "partition": 0}])
    assert [d.error for d in first.reports] == [None]
    second = produce(prod, topic, [{"value": too_big, "partition": 0}])
    assert [d.error.name() if d.error else None for d in second.reports] == ["MSG_SIZE_TOO_LARGE"]
    third = produce(prod, topic, [{"value": b"small", "partition": 0}])
    assert [d.error for d in third.reports] == [None]
    consumed = consume_all(target.bootstrap, topic, [0])[0]
    assert [(c.offset, c.value) for c in consumed] == [(0, fits), (1, b"small")]


def test_message_at_topic_max_message_bytes_and_one_byte_over(
    target, topic_name: Callable[..., str]
) -> None:
    """A batch of exactly max.message.bytes is taken; one byte more is MESSAGE_TOO_LARGE
    (librdkafka: MSG_SIZE_TOO_LARGE), and the partition keeps working."""
    _max_bytes_case(target, topic_name, 100_000, {"max.message.bytes": "100000"})


def test_message_at_broker_message_max_bytes_and_one_byte_over(
    target, topic_name: Callable[..., str]
) -> None:
    """The same at the broker's message.max.bytes (about 1 MB: bigger than the consumer's
    max.partition.fetch.bytes, so the fetch must still return the whole batch)."""
    limit = int(broker_config(target.bootstrap, "message.max.bytes"))
    _max_bytes_case(target, topic_name, limit, {})


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(target, topic_name: Callable[..., str], acks: str) -> None:
    """Every acks setting stores every message once, in order per partition; with acks=0 the
    delivery report has no offset."""
    partitions, count = 2, 400
    topic = topic_name()
    create_topic(target.bootstrap, topic, partitions)
    messages = [
        {"value": b"%s-%05d" % (acks.encode(), i), "partition": i % 2} for i in range(count)
    ]
    deliveries = produce_all(
        producer(target.bootstrap, **{"acks": acks, "batch.num.messages": 25}), topic, messages
    )
    assert len(deliveries.succeeded) == count
    if acks == "0":
        assert {d.offset for d in deliveries.succeeded} == {None}  # no offset known
    else:
        for p in range(partitions):
            offsets = [d.offset for d in deliveries.succeeded if d.partition == p]
            assert sorted(offsets) == list(range(count // partitions))
    # acks=0: the producer does not wait for the append; wait for the log ends.
    wait_until(
        lambda: all(
            watermarks(target.bootstrap, topic, p)[1] == count // partitions
            for p in range(partitions)
        ),
        message="every message to be appended",
    )
    consumed = consume_all(target.bootstrap, topic, range(partitions))
    for p in range(partitions):
        assert [c.value for c in consumed[p]] == [
            m["value"] for m in messages if m["partition"] == p
        ]


def test_order_within_a_partition(target, topic_name: Callable[..., str]) -> None:
    """Many small batches, five in flight: offsets follow production order exactly."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    values = [b"seq-%06d" % i for i in range(5000)]
    prod = producer(
        target.bootstrap,
        **{"batch.num.messages": 20, "linger.ms": 1, "max.in.flight.requests.per.connection": 5},
    )
    deliveries = produce_all(prod, topic, ({"value": v, "partition": 0} for v in values))
    assert [d.offset for d in sorted(deliveries.succeeded, key=lambda d: d.value)] == list(
        range(len(values))
    )
    consumed = consume_all(target.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == values
    assert [c.offset for c in consumed] == list(range(len(values)))


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec", "stored"),
    [
        ("gzip", "none", "gzip"),
        ("zstd", "lz4", "zstd"),
        ("lz4", "snappy", "lz4"),
        ("snappy", "gzip", "snappy"),
        ("uncompressed", "zstd", "none"),
        ("producer", "zstd", "zstd"),
    ],
)
def test_topic_compression_type(
    target,
    topic_name: Callable[..., str],
    topic_codec: str,
    producer_codec: str,
    stored: str,
) -> None:
    """The topic's compression.type decides the stored codec: the broker recompresses what
    the producer sent (unless it is "producer"); consumers read the same records."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1, config={"compression.type": topic_codec})
    values = [b"compressible record %04d " % i * 8 for i in range(200)]
    prod = producer(target.bootstrap, **{"compression.type": producer_codec, "linger.ms": 20})
    produce_all(prod, topic, ({"value": v, "key": b"k", "partition": 0} for v in values))
    consumed = consume_all(target.bootstrap, topic, [0], **{"check.crcs": True})[0]
    assert [(c.offset, c.key, c.value) for c in consumed] == [
        (i, b"k", v) for i, v in enumerate(values)
    ]
    codecs = {batch.attributes & 0x07 for batch in stored_batches(target.bootstrap, topic, 0)}
    assert codecs == {CODECS.index(stored)}


def test_log_append_time_topic(target, topic_name: Callable[..., str]) -> None:
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's
    timestamps, in the delivery report, for consumers and for timestamp lookups."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    deliveries = produce_all(
        producer(target.bootstrap),
        topic,
        ({"value": b"%d" % i, "timestamp": BASE_TS + i, "partition": 0} for i in range(10)),
    )
    after = int(time.time() * 1000)
    consumed = consume_all(target.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == [b"%d" % i for i in range(10)]
    for report, record in zip(deliveries.succeeded, consumed, strict=True):
        assert record.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= record.timestamp <= after + 1000
        assert report.timestamp == (TIMESTAMP_LOG_APPEND_TIME, record.timestamp)
    assert offsets_for_times(target.bootstrap, topic, [BASE_TS, before - 1000, after + 5000]) == [
        0,
        0,
        -1,
    ]
