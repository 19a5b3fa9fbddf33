"""Round trip through a real broker with confluent-kafka: several partitions, keys, headers,
explicit timestamps and every compression codec. Every message comes back exactly once, in
order per partition, with key, value, headers and timestamp intact."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TopicPartition
from e2e_helpers import (
    batch_attributes,
    consume_all,
    consumer,
    create_topic,
    produce_all,
    producer,
    segment_files,
)

from kafkalite.testing import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 60
BASE_TS = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
WORDS = [b"kafka", b"lite", b"broker", b"segment", b"offset", b"\x00\xff", b"record"]


def _messages(seed: int) -> list[dict]:
    rng = random.Random(seed)
    messages = []
    for i in range(PARTITIONS * PER_PARTITION):
        partition = i % PARTITIONS
        size = rng.choice([0, 1, 10, 100, 1000, 5000])
        # Compressible (words) with a random tail, so every codec actually compresses:
        # librdkafka sends a batch uncompressed when compression would not shrink it.
        words = b" ".join(rng.choice(WORDS) for _ in range(size // 6))
        value: bytes | None = b"%05d:" % i + words + rng.randbytes(min(size, 16))
        key: bytes | None = b"key-%d" % i
        headers = [("idx", str(i).encode()), ("dup", b"first"), ("dup", b"second")]
        if i % 17 == 0:
            key = None
        if i % 23 == 5:
            value = None  # a tombstone
        if i % 11 == 3:
            headers.append(("empty", b""))
        if i % 13 == 4:
            headers = []
        messages.append(
            {
                "key": key,
                "value": value,
                "partition": partition,
                "headers": headers,
                "timestamp": BASE_TS + i * 7 - (i % 5) * 1000,  # not monotonic
            }
        )
    return messages


@pytest.mark.parametrize("codec", list(CODECS))
def test_round_trip_every_codec(
    module_broker: BrokerProcess, topic_name: Callable[..., str], codec: str
) -> None:
    topic = topic_name()
    create_topic(module_broker.bootstrap, topic, PARTITIONS)
    messages = _messages(seed=list(CODECS).index(codec))
    prod = producer(
        module_broker.bootstrap,
        **{"compression.type": codec, "linger.ms": 20, "acks": "all"},
    )
    deliveries = produce_all(prod, topic, messages)
    assert len(deliveries.succeeded) == len(messages)
    offsets_by_partition: dict[int, list[int]] = {}
    for d in deliveries.succeeded:
        offsets_by_partition.setdefault(d.partition, []).append(d.offset)
    for partition, offsets in offsets_by_partition.items():
        assert sorted(offsets) == list(range(PER_PARTITION)), partition

    consumed = consume_all(module_broker.bootstrap, topic, range(PARTITIONS))
    for partition in range(PARTITIONS):
        expected = [m for m in messages if m["partition"] == partition]
        got = consumed[partition]
        assert [c.offset for c in got] == list(range(PER_PARTITION)), "gaps or duplicates"
        for want, have in zip(expected, got, strict=True):
            assert have.key == want["key"]
            assert have.value == want["value"]
            assert list(have.headers) == want["headers"]
            assert (have.timestamp_type, have.timestamp) == (
                TIMESTAMP_CREATE_TIME,
                want["timestamp"],
            )


@pytest.mark.parametrize(
    "codec",
    [codec for codec in CODECS if codec != "none"],
)
def test_producer_codec_is_stored(
    module_broker: BrokerProcess, topic_name: Callable[..., str], codec: str
) -> None:
    """The batches really are stored compressed with the producer's codec. librdkafka
    silently sends uncompressed when it thinks the broker cannot take a codec: LZ4 needs
    FindCoordinator advertised (its feature map: RD_KAFKA_FEATURE_LZ4 depends on
    FindCoordinator v0), zstd needs Produce v7 and Fetch v10, and gzip/snappy/lz4 need
    Produce's advertised min version to be 0 (librdkafka <= 2.11)."""
    topic = topic_name()
    create_topic(module_broker.bootstrap, topic, 1)
    prod = producer(module_broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    values = [b"kafka lite broker %d " % i * 20 for i in range(50)]
    produce_all(prod, topic, ({"value": v, "partition": 0} for v in values))
    (log_file,) = segment_files(module_broker.data_dir, topic, 0)
    attributes = batch_attributes(log_file)
    assert attributes, "no batch on disk"
    assert {a & 0x07 for a in attributes} == {CODECS[codec]}
    assert len(attributes) < len(values), "expected multi-record batches (linger.ms)"
    assert [c.value for c in consume_all(module_broker.bootstrap, topic, [0])[0]] == values


def test_round_trip_large_messages(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """Messages near the 1 MB default limit, one per batch, come back intact."""
    topic = topic_name()
    create_topic(module_broker.bootstrap, topic, 1)
    rng = random.Random(7)
    values = [rng.randbytes(900_000), rng.randbytes(10), rng.randbytes(500_000)]
    prod = producer(module_broker.bootstrap, **{"linger.ms": 0})
    produce_all(prod, topic, ({"value": v, "partition": 0} for v in values))
    consumed = consume_all(module_broker.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == values


def test_round_trip_auto_created_topic(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """Producing to an unknown topic auto-creates it (auto.create.topics.enable default)."""
    topic = topic_name()
    prod = producer(module_broker.bootstrap)
    produce_all(prod, topic, ({"key": b"k", "value": b"v%d" % i} for i in range(10)))
    consumed = consume_all(module_broker.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == [b"v%d" % i for i in range(10)]


@pytest.mark.parametrize("where", ["topic", "broker"])
def test_log_append_time(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str], where: str
) -> None:
    """message.timestamp.type=LogAppendTime: the broker stamps every record with its own
    clock; consumers see TIMESTAMP_LOG_APPEND_TIME and timestamp lookups use that time."""
    overrides = {"log.message.timestamp.type": "LogAppendTime"} if where == "broker" else {}
    broker = broker_factory(overrides)
    topic = topic_name()
    config = {"message.timestamp.type": "LogAppendTime"} if where == "topic" else {}
    create_topic(broker.bootstrap, topic, 1, config)
    before = int(time.time() * 1000)
    prod = producer(broker.bootstrap, **{"linger.ms": 50, "compression.type": "gzip"})
    produce_all(prod, topic, ({"value": b"v%d" % i, "timestamp": 1_000 + i} for i in range(20)))
    after = int(time.time() * 1000)
    consumed = consume_all(broker.bootstrap, topic, [0])[0]
    assert len(consumed) == 20
    for record in consumed:
        assert record.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= record.timestamp <= after + 1000, "not the broker's clock"
    cons = consumer(broker.bootstrap)
    try:
        (early,) = cons.offsets_for_times([TopicPartition(topic, 0, 5_000)], timeout=20)
        assert early.offset == 0  # the producer's timestamps (1000...) were replaced
        (late,) = cons.offsets_for_times([TopicPartition(topic, 0, after + 60_000)], timeout=20)
        assert late.offset == -1
    finally:
        cons.close()
