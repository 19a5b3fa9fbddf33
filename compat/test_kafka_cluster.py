"""compat/kafka_cluster.py: a 3-node KRaft Apache Kafka cluster comes up with every node a
broker and a voter, takes a replication-factor-3 topic with min.insync.replicas=2, keeps taking
acks=all writes with one node SIGKILLed, and stops every process."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.slow, pytest.mark.kafka]


def test_a_three_node_cluster_replicates_and_survives_a_killed_node(tmp_path: Path):
    with KafkaCluster(tmp_path, nodes=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        metadata = admin.list_topics(timeout=30)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert metadata.controller_id in (1, 2, 3)
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(60)
        partition = _partition_on_every_broker(admin, "replicated")
        assert sorted(partition.replicas) == [1, 2, 3]

        victim = next(n for n in cluster.nodes if n.node_id == partition.leader)
        victim.stop(signal.SIGKILL)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True})  # fmt: skip
        acked = []
        for i in range(10):
            producer.produce(
                "replicated", str(i).encode(), on_delivery=lambda e, m: acked.append(e)
            )
        assert producer.flush(60) == 0
        assert acked == [None] * 10  # two of three replicas meet min.insync.replicas=2
        pids = [n.process.pid for n in cluster.nodes if n.process]
    assert all(n.process is None for n in cluster.nodes)
    assert len(pids) == 2


def _partition_on_every_broker(admin: AdminClient, topic: str):
    """Partition 0 of `topic` once the answering node knows it: KRaft answers CreateTopics when
    the controller has committed the topic, before every broker has applied that record."""
    deadline = time.monotonic() + 60
    while True:
        partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
        if 0 in partitions and partitions[0].leader >= 0:
            return partitions[0]
        assert time.monotonic() < deadline, f"{topic} never reached the metadata"
        time.sleep(0.1)
