"""DeleteRecords on a replicated partition (real processes: a real ZooKeeper, three
`kafkalite serve` brokers): the answer comes once every follower has moved its log start too
(Kafka's DelayedDeleteRecords), so the deleted records stay deleted when the leader dies."""

from __future__ import annotations

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow
TOPIC = "trimmed"


def produce(bootstrap: str, count: int) -> int:
    delivered = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(
            TOPIC, b"%d" % i, partition=0, on_delivery=lambda e, m: delivered.append(e)
        )
    assert producer.flush(60) == 0
    return delivered.count(None)


def test_deleted_records_stay_deleted_on_the_next_leader(start_brokers: StartBrokers) -> None:
    brokers = start_brokers({})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(30)

    def partition() -> tuple[int, int]:
        meta = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
        return meta.leader, len(meta.isrs)

    poll(lambda: partition() == (1, 3), "leader 1 and a full ISR")
    assert produce(bootstrap, 10) == 10

    (result,) = admin.delete_records([TopicPartition(TOPIC, 0, 6)]).values()
    assert result.result(30).low_watermark == 6

    brokers[1].kill()  # no controlled shutdown: whatever the followers have is what is left
    poll(lambda: partition()[0] in (2, 3), "a new leader")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "trimmed-check"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30) == (6, 10)
    finally:
        consumer.close()
