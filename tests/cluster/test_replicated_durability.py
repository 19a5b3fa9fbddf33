"""The durability promise on real processes: a real ZooKeeper, three `kafkalite serve`
brokers, a topic with replication factor 3 and min.insync.replicas=2. An idempotent acks=all
producer writes a numbered stream while its partition's leader is SIGKILLed: every
acknowledged record is read back exactly once, in order, from the new leader."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow

TOPIC = "durable"
RECORDS = 3000
KILL_AFTER = 1000  # acknowledged records before the leader dies
WAIT = 60.0


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers({"min.insync.replicas": "2", "offsets.topic.replication.factor": "3"})


def partition_info(admin: AdminClient) -> Any:
    topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return topic.partitions[0] if topic.error is None and 0 in topic.partitions else None


def test_no_acknowledged_write_is_lost_when_the_leader_is_killed(
    brokers: dict[int, BrokerProcess],
) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    poll(lambda: (p := partition_info(admin)) and len(p.isrs) == 3, "a full ISR")
    leader = partition_info(admin).leader

    acked: list[int] = []
    failed: list[int] = []

    def delivered(error: Any, message: Any) -> None:
        (failed if error is not None else acked).append(int(message.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }
    )
    killed = False
    for number in range(RECORDS):
        producer.produce(TOPIC, str(number).encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
        if not killed and len(acked) >= KILL_AFTER:
            brokers[leader].kill()
            killed = True
        while len(producer) > 200:  # a bounded backlog keeps the kill mid-stream
            producer.poll(0.05)
            if not killed and len(acked) >= KILL_AFTER:
                brokers[leader].kill()
                killed = True
    assert producer.flush(WAIT) == 0
    assert killed and failed == []
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != leader)
    admin = AdminClient({"bootstrap.servers": survivors})
    new_leader = poll(
        lambda: (p := partition_info(admin)) and p.leader not in (-1, leader) and p.leader,
        "a new leader",
    )

    consumer = Consumer(
        {
            "bootstrap.servers": survivors,
            "group.id": "durability-check",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[int] = []
        deadline = time.monotonic() + WAIT
        while len(read) < len(acked) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(int(message.value()))
    finally:
        consumer.close()
    assert new_leader != leader
    # Every acknowledged record exactly once, in the order produced.
    assert read == sorted(set(read))
    assert set(acked) <= set(read)
    assert len(read) == RECORDS == len(acked)
