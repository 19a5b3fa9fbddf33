"""A replicated retry topic's records move exactly once across its leader's SIGKILL (issue
17 point 5): a real ZooKeeper, three `kafkalite serve` brokers; the retry topic (replication
factor 3)
is led by broker 1, its target by broker 2 and its dead-letter topic by broker 3, so every
record moves to another broker (a Produce with the retry partition's own idempotent
producer). Broker 1 is killed while the first attempts are being moved (in batches of about
ten records: the target's max.message.bytes is small), with the second attempts held; the
new leader resends an unfinished move (the target drops it if it has it) and moves the rest:
the target and the dead-letter topic hold each record once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll, read_int_values
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
# ~60 s (a SIGKILL and an election): outside the default run for CI time;
# `pytest -m extended tests/cluster/test_retry_topic_failover.py`.
pytestmark = [pytest.mark.slow, pytest.mark.extended]

RETRY, TARGET, DEAD = "orders-retry", "orders", "orders-dlt"
RECORDS = 300  # every fifth at its last attempt, then alternately first and second attempts
WAIT = 60.0
READ_WAIT = 120.0  # the ISR shrink, the election, then the moves, on a loaded machine


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers(
        {
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            # The killed broker leaves the target's ISR sooner (its acks=all moves wait).
            "replica.lag.time.max.ms": "10000",
        }
    )


def attempt_of(number: int) -> int:
    return 2 if number % 5 == 0 else number % 2


def partition_info(admin: AdminClient, topic: str) -> Any:
    found = admin.list_topics(topic, timeout=10).topics[topic]
    return found.partitions[0] if found.error is None and 0 in found.partitions else None


def read_all(bootstrap: str, topic: str, expected: int) -> list[int]:
    """Every record of the topic: until `expected` came, then 2 s more (nothing more may)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        return read_int_values(consumer, lambda read: len(read) >= expected, READ_WAIT, quiet=2.0)
    finally:
        consumer.close()


def test_retry_records_move_once_across_the_retry_leaders_sigkill(
    brokers: dict[int, BrokerProcess],
) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    retry_configs = {
        "kafkalite.retry.target": TARGET,
        "kafkalite.retry.backoff.ms": "3000,12000",
        "kafkalite.retry.max.attempts": "2",
        "kafkalite.retry.dead.letter.topic": DEAD,
    }
    created = admin.create_topics(
        [
            # Small batches: the first attempts move in many releases, one at a time.
            NewTopic(
                TARGET, 1, replica_assignment=[[2, 3, 1]], config={"max.message.bytes": "1024"}
            ),
            NewTopic(DEAD, 1, replica_assignment=[[3, 2, 1]]),
        ]
    )
    for future in created.values():
        future.result(30)
    admin.create_topics([NewTopic(RETRY, 1, replica_assignment=[[1, 2, 3]], config=retry_configs)])[
        RETRY
    ].result(30)
    for topic in (TARGET, DEAD, RETRY):
        poll(lambda t=topic: (p := partition_info(admin, t)) and len(p.isrs) == 3, "full ISRs")
    assert partition_info(admin, RETRY).leader == 1

    acked: list[int] = []
    failed: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        (failed if error is not None else acked).append(error or int(message.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for number in range(RECORDS):
        attempt = attempt_of(number)
        headers = [("kafkalite-retry-attempt", b"%d" % attempt)] if attempt else []
        producer.produce(
            RETRY, str(number).encode(), key=b"k%d" % number, headers=headers, on_delivery=delivered
        )
    assert producer.flush(WAIT) == 0
    assert failed == [] and len(acked) == RECORDS

    # The first attempts move after 3 s; kill broker 1 once some of them reached broker 2.
    target_admin = AdminClient({"bootstrap.servers": brokers[2].bootstrap})

    def moved_some() -> bool:
        consumer = Consumer({"bootstrap.servers": brokers[2].bootstrap, "group.id": "peek"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(TARGET, 0), timeout=5)
            return high > 0
        finally:
            consumer.close()

    poll(moved_some, "first attempts moving", wait=WAIT)
    brokers[1].kill()  # SIGKILL: the second attempts held, maybe a move unfinished
    poll(
        lambda: (p := partition_info(target_admin, RETRY)) and p.leader in (2, 3),
        "a new leader of the retry partition",
    )
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != 1)
    dead_letters = [n for n in range(RECORDS) if attempt_of(n) == 2]
    retried = [n for n in range(RECORDS) if attempt_of(n) < 2]
    for topic, expected in ((TARGET, retried), (DEAD, dead_letters)):
        read = Counter(read_all(survivors, topic, len(expected)))
        twice = sorted(n for n, count in read.items() if count > 1)
        missing = sorted(set(expected) - set(read))
        assert (twice, missing) == ([], []), topic
        assert sorted(read) == expected  # each exactly once
