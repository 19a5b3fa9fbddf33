"""Metadata (key 3) and CreateTopics (key 19) on the wire: names, ids, auto-creation."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import (
    RawClient,
    create_topics_request,
    metadata_by_id_request,
    metadata_request,
    unique_name,
)

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_ID = 100

INVALID_NAMES = ["bad name", "bad/name", "..", ".", "x" * 250, "ünicode"]


@pytest.mark.parametrize("name", INVALID_NAMES, ids=lambda n: n[:12])
def test_metadata_invalid_topic_name(client: RawClient, name: str) -> None:
    response = client.request(metadata_request([name], auto_create=True))
    (topic,) = response.topics
    assert topic.name == name
    assert topic.error_code == INVALID_TOPIC_EXCEPTION
    assert topic.partitions == ()


@pytest.mark.parametrize("name", INVALID_NAMES, ids=lambda n: n[:12])
def test_create_topics_invalid_topic_name(client: RawClient, name: str) -> None:
    response = client.request(create_topics_request(name))
    (result,) = response.topics
    assert result.name == name
    assert result.error_code == INVALID_TOPIC_EXCEPTION
    assert result.error_message


def test_create_topics_then_metadata(client: RawClient) -> None:
    name = unique_name("wire-create")
    response = client.request(create_topics_request(name, partitions=3))
    (result,) = response.topics
    assert result.error_code == NONE
    assert result.num_partitions == 3
    assert result.topic_id.int != 0
    again = client.request(create_topics_request(name, partitions=3)).topics[0]
    assert again.error_code == TOPIC_ALREADY_EXISTS
    (topic,) = client.request(metadata_request([name], auto_create=False)).topics
    assert topic.error_code == NONE
    assert topic.topic_id == result.topic_id
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]


def test_create_topics_validate_only_creates_nothing(client: RawClient) -> None:
    name = unique_name("wire-validate")
    result = client.request(create_topics_request(name, validate_only=True)).topics[0]
    assert result.error_code == NONE
    (topic,) = client.request(metadata_request([name], auto_create=False)).topics
    assert topic.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_unknown_topic_without_auto_create_flag(client: RawClient) -> None:
    """Metadata v4+ allow_auto_topic_creation=false: the topic is reported unknown."""
    name = unique_name("wire-unknown")
    for _ in range(2):
        (topic,) = client.request(metadata_request([name], auto_create=False)).topics
        assert topic.error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert topic.partitions == ()


def test_metadata_unknown_topic_with_broker_auto_create_off(
    broker_factory: Callable[..., BrokerProcess], connect: Callable[..., RawClient]
) -> None:
    """auto.create.topics.enable=false wins over the request's allow_auto_topic_creation."""
    no_auto = broker_factory({"auto.create.topics.enable": "false"})
    client = connect(no_auto)
    name = unique_name("wire-no-auto")
    for version in (1, 4, 12):
        (topic,) = client.request(metadata_request([name], True, version)).topics
        assert topic.error_code == UNKNOWN_TOPIC_OR_PARTITION, f"Metadata v{version}"
    all_topics = client.request(metadata_request(None)).topics
    assert name not in {t.name for t in all_topics}


def test_metadata_auto_create(client: RawClient) -> None:
    name = unique_name("wire-auto")
    (topic,) = client.request(metadata_request([name], auto_create=True)).topics
    assert topic.error_code == NONE
    assert [p.partition_index for p in topic.partitions] == [0]  # num.partitions=1
    (partition,) = topic.partitions
    assert partition.leader_id == 0
    assert list(partition.replica_nodes) == [0]
    assert list(partition.isr_nodes) == [0]


def test_metadata_by_topic_id(client: RawClient, new_topic: Callable) -> None:
    name, topic_id = new_topic()
    (topic,) = client.request(metadata_by_id_request(topic_id)).topics
    assert (topic.error_code, topic.name, topic.topic_id) == (NONE, name, topic_id)
    (unknown,) = client.request(metadata_by_id_request(uuid.uuid4())).topics
    assert unknown.error_code == UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12])
def test_metadata_every_version_lists_broker(
    client: RawClient, broker: BrokerProcess, new_topic: Callable, version: int
) -> None:
    name, _ = new_topic()
    response = client.request(metadata_request([name], auto_create=False, version=version))
    (node,) = response.brokers
    assert (node.host, node.port) == (broker.host, broker.port)
    (topic,) = response.topics
    assert (topic.error_code, topic.name) == (NONE, name)


def test_metadata_all_topics(client: RawClient, new_topic: Callable) -> None:
    names = {new_topic()[0] for _ in range(2)}
    listed = {t.name for t in client.request(metadata_request(None)).topics}
    assert names <= listed
