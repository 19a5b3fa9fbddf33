"""compat/kafka_cluster.py: a 3-node KRaft Apache Kafka cluster comes up with every node a
broker and a voter, takes a replication-factor-3 topic with min.insync.replicas=2, keeps taking
acks=all writes with one node SIGKILLed, and stops every process."""

from __future__ import annotations

import signal
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
        partition = admin.list_topics("replicated", timeout=30).topics["replicated"].partitions[0]
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
