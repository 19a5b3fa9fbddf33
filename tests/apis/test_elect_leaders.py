"""ElectLeaders on a single node, as confluent-kafka's AdminClient sees it: a one-broker Kafka
has nothing to elect (ELECTION_NOT_NEEDED), and names unknown partitions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess


@pytest.fixture
def admin(module_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": module_broker.bootstrap})


def codes(admin: AdminClient, election: ElectionType, partitions: list[TopicPartition] | None):
    results = admin.elect_leaders(election, partitions).result(timeout=30)
    return {
        (tp.topic, tp.partition): None if error is None else error.code()
        for tp, error in results.items()
    }


def test_single_node_elects_nothing(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    named = [TopicPartition(topic, 0), TopicPartition(topic, 7), TopicPartition("no-such", 0)]
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        assert codes(admin, election, named) == {
            (topic, 0): KafkaError.ELECTION_NOT_NEEDED,
            (topic, 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
            ("no-such", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
        }
        assert codes(admin, election, None) == {}  # every partition: none needed an election
