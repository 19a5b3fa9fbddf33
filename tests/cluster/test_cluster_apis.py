"""Admin and data APIs answered from the cluster metadata, asked of a broker that neither hosts
the partition nor is the controller (real processes: a real ZooKeeper, three brokers). The
topic `solo` lives on broker 1 alone."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kio.schema.errors import ErrorCode

from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, build, fetch_request

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow

TOPIC = "solo"
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
SOURCE_DEFAULT = 5


def ask(broker: BrokerProcess, request: Any) -> Any:
    with RawClient(broker.host, broker.port) as client:
        return client.request(request)


def describe_partitions(broker: BrokerProcess) -> Any:
    topic = build(75, 0, "TopicRequest", name=TOPIC)
    request = build(75, 0, "DescribeTopicPartitionsRequest", topics=(topic,), cursor=None)
    (answer,) = ask(broker, request).topics
    return answer


def describe_config(broker: BrokerProcess, resource_type: int, name: str, key: str) -> Any:
    resource = build(
        32,
        4,
        "DescribeConfigsResource",
        resource_type=resource_type,
        resource_name=name,
        configuration_keys=(key,),
    )
    (result,) = ask(broker, build(32, 4, "DescribeConfigsRequest", resources=(resource,))).results
    return result


def fetch_error(broker: BrokerProcess, version: int, topic_id: uuid.UUID) -> ErrorCode:
    request = fetch_request(TOPIC, 0, 0, version=version, topic_id=topic_id)
    return ask(broker, request).responses[0].partitions[0].error_code


def test_a_broker_without_the_partition_answers_from_the_cluster_metadata(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers({})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1]])])[TOPIC].result(30)
    controller = admin.describe_cluster().result(10).controller.id
    asked = brokers[next(i for i in (2, 3) if i != controller)]
    poll(lambda: describe_partitions(asked).error_code == ErrorCode.none, "the topic known")

    # DescribeTopicPartitions: the real replicas, ISR and leader.
    (partition,) = describe_partitions(asked).partitions
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (1, (1,), (1,))
    assert partition.offline_replicas == ()
    topic_id = describe_partitions(asked).topic_id

    # Fetch by name and by id: a partition of the cluster, not here.
    assert fetch_error(asked, 12, topic_id) is ErrorCode.not_leader_or_follower
    assert fetch_error(asked, 13, topic_id) is ErrorCode.not_leader_or_follower

    # DescribeConfigs: the topic's configs; every broker's own configs (clients ask each
    # broker), with Kafka's cluster-mode default for offsets.topic.replication.factor.
    topic_configs = describe_config(asked, RESOURCE_TOPIC, TOPIC, "cleanup.policy")
    assert topic_configs.error_code is ErrorCode.none
    assert [(c.name, c.value) for c in topic_configs.configs] == [("cleanup.policy", "delete")]
    key = "offsets.topic.replication.factor"
    for broker_id in brokers:
        resource = ConfigResource("broker", str(broker_id))
        entries = admin.describe_configs([resource])[resource].result(10)
        assert entries["broker.id"].value == str(broker_id)
        assert (entries[key].value, entries[key].source) == ("3", SOURCE_DEFAULT)

    # DescribeLogDirs: the replicas each broker really hosts.
    def hosted(broker: BrokerProcess) -> set[tuple[str, int]]:
        (result,) = ask(broker, build(35, 4, "DescribeLogDirsRequest", topics=None)).results
        return {(t.name, p.partition_index) for t in result.topics for p in t.partitions}

    assert (TOPIC, 0) not in hosted(asked)
    assert (TOPIC, 0) in hosted(brokers[1])

    # CreatePartitions: checked against the cluster's partition count.
    def grow(count: int) -> tuple[ErrorCode, str | None]:
        topic = build(37, 3, "CreatePartitionsTopic", name=TOPIC, count=count, assignments=None)
        request = build(
            37,
            3,
            "CreatePartitionsRequest",
            topics=(topic,),
            timeout=datetime.timedelta(seconds=30),
            validate_only=False,
        )
        (result,) = ask(asked, request).results
        return result.error_code, result.error_message

    assert grow(1) == (ErrorCode.invalid_partitions, "Topic already has 1 partition(s).")
    assert grow(2) == (ErrorCode.none, None)
    poll(lambda: len(describe_partitions(asked).partitions) == 2, "2 partitions")

    # Broker 1 stops: its replica is offline and partition 0 has no leader.
    brokers[1].stop()
    poll(lambda: describe_partitions(asked).partitions[0].leader_id == -1, "partition 0 offline")
    assert describe_partitions(asked).partitions[0].offline_replicas == (1,)

    # DeleteTopics: the topic exists in the cluster, not here.
    def delete(name: str) -> ErrorCode:
        state = build(20, 6, "DeleteTopicState", name=name, topic_id=uuid.UUID(int=0))
        request = build(
            20, 6, "DeleteTopicsRequest", topics=(state,), timeout=datetime.timedelta(seconds=30)
        )
        return ask(asked, request).responses[0].error_code

    assert delete("nope") is ErrorCode.unknown_topic_or_partition
    assert delete(TOPIC) is ErrorCode.none
    poll(
        lambda: describe_partitions(asked).error_code == ErrorCode.unknown_topic_or_partition,
        "the topic deleted",
    )
