"""Share groups (KIP-932) on three `kafkalite serve` brokers: the group coordinator, the
share coordinators (`__share_group_state` leaders) and the share-partition leaders are spread
over the brokers, so a share-partition leader reads and writes its state on another broker's
share coordinator (Kafka's Read/WriteShareGroupState, broker/share_persister.py).

Two confluent-kafka ShareConsumers read a 3-partition topic produced with acks=all: every
record is delivered, and acknowledged, exactly once. Then the leader of a user partition (and
of share coordinators) is SIGKILLed under load: every record is still delivered, and none
whose acknowledgement was answered with success is delivered again. Counts are exact.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import KafkaException, Producer, ShareConsumer
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


def leader_of(admin: AdminClient, partition: int) -> int:
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[partition].leader


@dataclass
class Tally:
    """What the consumers saw: deliveries per value, the values whose acknowledgement the
    broker answered with success, and deliveries of those again (must be none)."""

    delivered: Counter[bytes] = field(default_factory=Counter)
    per_consumer: Counter[int] = field(default_factory=Counter)
    acknowledged: set[bytes] = field(default_factory=set)
    again: list[bytes] = field(default_factory=list)
    warmed: set[int] = field(default_factory=set)
    errors: int = 0

    def poll(self, consumers: list[ShareConsumer]) -> None:
        """Each consumer polls once; what it got is ACCEPTed (implicit mode) and committed
        at once, so the answer per partition says which acknowledgements are durable."""
        for index, consumer in enumerate(consumers):
            try:
                messages = consumer.poll(0.1)
            except KafkaException:  # a leader or coordinator moving (after the kill)
                self.errors += 1
                continue
            for message in messages:
                assert message.error() is None, message.error()
                if message.value() == b"warm":
                    self.warmed.add(message.partition())
                    continue
                if message.value() in self.acknowledged:
                    self.again.append(message.value())
                self.delivered[message.value()] += 1
                self.per_consumer[index] += 1
            if messages:
                self._commit(consumer, messages)

    def _commit(self, consumer: ShareConsumer, messages: list[Any]) -> None:
        try:
            answers = consumer.commit_sync(10)
        except KafkaException:
            self.errors += 1
            return
        durable = {tp.partition for tp, error in answers.items() if error is None}
        self.acknowledged.update(
            m.value() for m in messages if m.partition() in durable and m.value() != b"warm"
        )


def produce(producer: Producer, values: list[bytes]) -> None:
    for number, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=number % PARTITIONS)
    assert producer.flush(60) == 0


def consume(tally: Tally, consumers: list[ShareConsumer], values: list[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not all(v in tally.delivered for v in values):
        missing = sum(v not in tally.delivered for v in values)
        assert time.monotonic() < deadline, f"{missing} of {len(values)} never delivered"
        tally.poll(consumers)


@pytest.mark.broker_errors_expected("a broker is SIGKILLed: its peers log the lost connections")
def test_share_consumers_read_each_record_once_and_acknowledged_ones_survive_a_kill(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers(BROKERS)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    poll(lambda: full_isr(admin), "a full ISR")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    consumers = [
        ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP}) for _ in range(2)
    ]
    tally = Tally()
    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        # share.auto.offset.reset is latest: a share-partition starts where it is first read.
        # A warm-up record delivered from each partition says each one has started.
        deadline = time.monotonic() + DEADLINE
        while len(tally.warmed) < PARTITIONS:
            assert time.monotonic() < deadline, f"warm-up: only partitions {tally.warmed}"
            for partition in set(range(PARTITIONS)) - tally.warmed:
                producer.produce(TOPIC, value=b"warm", partition=partition)
            producer.flush(10)
            tally.poll(consumers)
        before = [f"r{i}".encode() for i in range(RECORDS)]
        produce(producer, before)
        consume(tally, consumers, before)
        for _ in range(5):  # nothing comes twice, nor after
            tally.poll(consumers)
        assert sorted(tally.delivered) == sorted(before)
        assert set(tally.delivered.values()) == {1}
        assert sum(tally.per_consumer.values()) == RECORDS
        assert tally.acknowledged == set(before)
        # The leader of partition 0 dies: it led a user partition, and share coordinators
        # (`__share_group_state` partitions, one per broker at most).
        victim = brokers[leader_of(admin, 0)]
        victim.kill()
        after = [f"s{i}".encode() for i in range(RECORDS)]
        produce(producer, after)
        consume(tally, consumers, after)
        for _ in range(5):
            tally.poll(consumers)
        print(
            "DIAG",
            tally.errors,
            sum(tally.delivered.values()),
            len(tally.acknowledged),
            victim.bootstrap,
        )
        assert tally.again == []  # nothing whose acknowledgement was answered came back
        assert set(tally.delivered) == {*before, *after}
    finally:
        for consumer in consumers:
            consumer.close()
