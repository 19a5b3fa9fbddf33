"""A share group administered with Apache Kafka's own tools (kafka-share-groups 4.3, from
compat/kafka_tools.py) while confluent-kafka's ShareConsumer reads: its offsets described
(start offset and lag), reset to the earliest (the records are delivered again) and deleted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer, ShareConsumer

from compat.kafka_tools import run_tool
from kafkalite.testing import EmbeddedBroker

DEADLINE = 20.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", {"group.share.heartbeat.interval.ms": "500"}) as running:
        yield running


def start_offset(broker: EmbeddedBroker, group: str) -> int:
    states = broker.call(lambda: broker.broker.share_groups.partitions.coordinator.states)
    return next(state.start_offset for key, state in states.items() if key.group_id == group)


def consume(broker: EmbeddedBroker, group: str, topic: str, count: int) -> list[int]:
    """The offsets a ShareConsumer receives, polling (its next poll accepts what the last
    one returned) until `count` are received and acknowledged; it then closes, leaving the
    group empty (librdkafka's close does not acknowledge: what it holds is released)."""
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    offsets: list[int] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(offsets) < count or start_offset(broker, group) < max(offsets) + 1:
            assert time.monotonic() < deadline, f"received {offsets}"
            offsets.extend(m.offset() for m in consumer.poll(0.2) if m.error() is None)
    finally:
        consumer.close()
    return offsets


def share_groups_tool(broker: EmbeddedBroker, *args: str) -> list[list[str]]:
    """kafka-share-groups' output, as the words of each non-empty line."""
    run = run_tool("kafka-share-groups", broker.bootstrap, *args)
    assert run.exit_code == 0, run.stderr
    return [line.split() for line in run.stdout.splitlines() if line.strip()]


def test_offsets_described_reset_and_deleted_by_kafka_share_groups(
    broker: EmbeddedBroker,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"jobs-{suffix}", f"workers-{suffix}"
    broker.create_topic(topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:  # joined (the share-partition starts at the end of the log) before producing
        deadline = time.monotonic() + DEADLINE
        while not broker.call(
            lambda: broker.broker.share_groups.coordinator.describe(group)
        ).members:
            assert time.monotonic() < deadline
            assert not list(consumer.poll(0.1))
    finally:
        consumer.close()
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(DEADLINE) == 0
    assert sorted(consume(broker, group, topic, 5)) == [0, 1, 2, 3, 4]
    describe = ["--describe", "--group", group, "--offsets"]
    assert share_groups_tool(broker, *describe) == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        [group, topic, "0", "5", "0"],
    ]
    reset = ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"]
    assert share_groups_tool(broker, *reset) == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [group, topic, "0", "0"],
    ]
    assert sorted(consume(broker, group, topic, 5)) == [0, 1, 2, 3, 4]
    assert share_groups_tool(broker, "--delete-offsets", "--group", group, "--topic", topic) == [
        ["TOPIC", "STATUS"],
        [topic, "Successful"],
    ]
    assert share_groups_tool(broker, *describe) == [
        ["Share", "group", f"'{group}'", "has", "no", "offset", "information."]
    ]
