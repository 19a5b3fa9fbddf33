"""Held records survive their leader's SIGKILL (issue 17, the delay store is replicated):
a real ZooKeeper, three `kafkalite serve` brokers, a topic with replication factor 3 that
opts in. An idempotent acks=all producer's delayed records are all acknowledged (so held
by the store's copies in the ISR), the leader is killed before they are due, and the new
leader releases each of them exactly once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
# ~55 s (a SIGKILL, an election and the delay): outside the default run for CI time;
# `pytest -m extended tests/cluster/test_delayed_delivery_failover.py` (or make test-extended).
pytestmark = [pytest.mark.slow, pytest.mark.extended]

TOPIC = "delayed-failover"
RECORDS = 300
DELAY_MS = 8000  # long enough for the kill and the election before they are due
WAIT = 60.0


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers(
        {
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
        }
    )


def partition_info(admin: AdminClient) -> Any:
    topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return topic.partitions[0] if topic.error is None and 0 in topic.partitions else None


def test_held_records_are_released_once_by_the_new_leader(
    brokers: dict[int, BrokerProcess],
) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    configs = {"kafkalite.delayed.delivery.enable": "true"}
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=configs)])[TOPIC].result(30)
    poll(lambda: (p := partition_info(admin)) and len(p.isrs) == 3, "a full ISR")
    leader = partition_info(admin).leader

    acked: list[int] = []
    failed: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        (failed if error is not None else acked).append(error or int(message.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    headers = [("kafkalite-delay-ms", str(DELAY_MS).encode())]
    for number in range(RECORDS):
        producer.produce(
            TOPIC, str(number).encode(), partition=0, headers=headers, on_delivery=delivered
        )
    assert producer.flush(WAIT) == 0
    assert failed == [] and len(acked) == RECORDS
    brokers[leader].kill()  # SIGKILL, with every record held

    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != leader)
    admin = AdminClient({"bootstrap.servers": survivors})
    poll(
        lambda: (p := partition_info(admin)) and p.leader not in (-1, leader) and p.leader,
        "a new leader",
    )
    consumer = Consumer(
        {"bootstrap.servers": survivors, "group.id": "failover-check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[int] = []
        deadline = time.monotonic() + WAIT
        while len(read) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(int(message.value()))
        # Nothing more comes (no record released twice).
        quiet_until = time.monotonic() + 2.0
        while time.monotonic() < quiet_until:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append(int(message.value()))
    finally:
        consumer.close()
    assert sorted(read) == list(range(RECORDS))  # each exactly once
