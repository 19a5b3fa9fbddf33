"""ListOffsets through confluent-kafka: Consumer.offsets_for_times with explicit message
timestamps, and AdminClient.list_offsets with earliest / latest / max_timestamp /
for_timestamp."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import OffsetSpec
from e2e_helpers import CLIENT_TIMEOUT, admin, consumer, create_topic, produce_all, producer

from kafkalite.testing import BrokerProcess

BASE = 1_700_000_000_000
# Offset i has timestamp STAMPS[i]: increasing except offset 6, which holds the maximum,
# so "first offset with timestamp >= t" and "max timestamp" differ.
STAMPS = [BASE + 1000 * i for i in range(10)]
STAMPS[6] = BASE + 50_000


@pytest.fixture(scope="module")
def topics(module_broker: BrokerProcess) -> dict[str, str]:
    """Two topics with the same timestamps: one batch per message, and one single batch."""
    names = {}
    for layout, linger in (("separate", 0), ("batched", 500)):
        name = f"list-offsets-{layout}-{uuid.uuid4().hex[:10]}"
        create_topic(module_broker.bootstrap, name, 2)
        prod = producer(module_broker.bootstrap, **{"linger.ms": linger})
        produce_all(
            prod,
            name,
            ({"value": b"v%d" % i, "timestamp": ts, "partition": 0} for i, ts in enumerate(STAMPS)),
        )
        names[layout] = name
    return names


def _offsets_for_times(bootstrap: str, topic: str, timestamp: int, partition: int = 0) -> int:
    cons = consumer(bootstrap)
    try:
        (result,) = cons.offsets_for_times(
            [TopicPartition(topic, partition, timestamp)], timeout=CLIENT_TIMEOUT
        )
        assert result.error is None, result.error
        return result.offset
    finally:
        cons.close()


CASES = [
    (BASE - 5000, 0),  # before everything: the first offset
    (BASE, 0),  # exact
    (BASE + 1, 1),
    (BASE + 2500, 3),
    (BASE + 5000, 5),
    (BASE + 5001, 6),  # offset 6 (BASE+50s) is the first with a timestamp >= target
    (BASE + 9000, 6),
    (BASE + 50_000, 6),
    (BASE + 50_001, OFFSET_END),  # after everything: -1
]


@pytest.mark.parametrize("layout", ["separate", "batched"])
@pytest.mark.parametrize(("timestamp", "expected"), CASES)
def test_offsets_for_times(
    module_broker: BrokerProcess,
    topics: dict[str, str],
    layout: str,
    timestamp: int,
    expected: int,
) -> None:
    assert _offsets_for_times(module_broker.bootstrap, topics[layout], timestamp) == expected


def test_offsets_for_times_empty_partition(
    module_broker: BrokerProcess, topics: dict[str, str]
) -> None:
    assert _offsets_for_times(module_broker.bootstrap, topics["separate"], BASE, 1) == OFFSET_END


@pytest.mark.parametrize("layout", ["separate", "batched"])
def test_admin_list_offsets(
    module_broker: BrokerProcess, topics: dict[str, str], layout: str
) -> None:
    topic = topics[layout]
    client = admin(module_broker.bootstrap)
    specs = {
        "earliest": (OffsetSpec.earliest(), 0),
        "latest": (OffsetSpec.latest(), 10),
        "max_timestamp": (OffsetSpec.max_timestamp(), 6),
        "for_timestamp": (OffsetSpec.for_timestamp(BASE + 2500), 3),
        "for_timestamp_after_all": (OffsetSpec.for_timestamp(BASE + 60_000), -1),
    }
    for label, (spec, expected) in specs.items():
        futures = client.list_offsets({TopicPartition(topic, 0): spec}, request_timeout=10)
        info = futures[TopicPartition(topic, 0)].result(timeout=CLIENT_TIMEOUT)
        assert info.offset == expected, label
        if label == "max_timestamp":
            assert info.timestamp == BASE + 50_000
        if label == "for_timestamp":
            assert info.timestamp == BASE + 3000


def test_admin_list_offsets_empty_partition(
    module_broker: BrokerProcess, topics: dict[str, str]
) -> None:
    client = admin(module_broker.bootstrap)
    tp = TopicPartition(topics["separate"], 1)
    for spec, expected in (
        (OffsetSpec.earliest(), 0),
        (OffsetSpec.latest(), 0),
        (OffsetSpec.max_timestamp(), -1),
    ):
        info = client.list_offsets({tp: spec})[tp].result(timeout=CLIENT_TIMEOUT)
        assert info.offset == expected


def test_list_offsets_after_more_data(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """Latest follows the log end; a timestamp lookup finds data appended later."""
    topic = topic_name()
    create_topic(module_broker.bootstrap, topic, 1)
    client = admin(module_broker.bootstrap)
    tp = TopicPartition(topic, 0)
    for round_ in range(3):
        produce_all(
            producer(module_broker.bootstrap),
            topic,
            ({"value": b"x", "timestamp": BASE + round_ * 100 + i} for i in range(5)),
        )
        latest = client.list_offsets({tp: OffsetSpec.latest()})[tp].result(CLIENT_TIMEOUT)
        assert latest.offset == 5 * (round_ + 1)
        found = _offsets_for_times(module_broker.bootstrap, topic, BASE + round_ * 100)
        assert found == 5 * round_
