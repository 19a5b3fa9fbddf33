"""Share groups (KIP-932) on three `kafkalite serve` brokers: the group coordinator, the
share coordinators (`__share_group_state` leaders) and the share-partition leaders are spread
over the brokers, so a share-partition leader reads and writes its state on another broker's
share coordinator (Kafka's Read/WriteShareGroupState, broker/share_persister.py).

Two confluent-kafka ShareConsumers read a 3-partition topic produced with acks=all: every
record is delivered, and acknowledged, exactly once. Counts are exact.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow

TOPIC = "jobs"
GROUP = "workers"
PARTITIONS = 3
RECORDS = 300
DEADLINE = 60.0
BROKERS = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.heartbeat.interval.ms": "500",
}


def full_isr(admin: AdminClient) -> bool:
    topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    if topic is None or topic.error is not None or len(topic.partitions) != PARTITIONS:
        return False
    return all(p.leader >= 0 and len(p.isrs) == 3 for p in topic.partitions.values())


def test_two_share_consumers_read_each_record_exactly_once(start_brokers: StartBrokers) -> None:
    brokers = start_brokers(BROKERS)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    poll(lambda: full_isr(admin), "a full ISR")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    consumers = [
        ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP}) for _ in range(2)
    ]
    delivered: Counter[bytes] = Counter()
    per_consumer: Counter[int] = Counter()
    warmed: set[int] = set()

    def poll_consumers() -> None:
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.1):
                assert message.error() is None, message.error()
                if message.value().startswith(b"warm"):
                    warmed.add(message.partition())
                else:
                    delivered[message.value()] += 1
                    per_consumer[index] += 1

    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        # share.auto.offset.reset is latest: a share-partition starts where it is first read.
        # A warm-up record delivered from each partition says each one has started.
        deadline = time.monotonic() + DEADLINE
        while len(warmed) < PARTITIONS:
            assert time.monotonic() < deadline, f"warm-up: only partitions {warmed}"
            for partition in set(range(PARTITIONS)) - warmed:
                producer.produce(TOPIC, value=b"warm", partition=partition)
            producer.flush(10)
            poll_consumers()
        values = [f"r{i}".encode() for i in range(RECORDS)]
        for number, value in enumerate(values):
            producer.produce(TOPIC, value=value, partition=number % PARTITIONS)
        assert producer.flush(30) == 0
        deadline = time.monotonic() + DEADLINE
        while len(delivered) < RECORDS:
            assert time.monotonic() < deadline, f"{len(delivered)} of {RECORDS} delivered"
            poll_consumers()
        for _ in range(10):  # nothing comes twice, nor after
            poll_consumers()
        assert sorted(delivered) == sorted(values)
        assert set(delivered.values()) == {1}
        assert sum(per_consumer.values()) == RECORDS
    finally:
        for consumer in consumers:
            consumer.close()
