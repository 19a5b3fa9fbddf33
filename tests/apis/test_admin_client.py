"""The admin APIs as a real client sees them: confluent-kafka's AdminClient on a broker process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from kafkalite.testing import BrokerProcess


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AdminClient, str]]:
    with BrokerProcess(tmp_path_factory.mktemp("admin-client")) as broker:
        yield AdminClient({"bootstrap.servers": broker.bootstrap}), broker.bootstrap


def result(futures: dict[Any, Any]) -> Any:
    [future] = futures.values()
    return future.result(timeout=10)


def error_code(futures: dict[Any, Any]) -> int:
    with pytest.raises(KafkaException) as info:
        result(futures)
    return info.value.args[0].code()


def topic_configs(client: AdminClient, name: str) -> dict[str, Any]:
    return result(client.describe_configs([ConfigResource(ResourceType.TOPIC, name)]))


def test_topic_lifecycle(admin: tuple[AdminClient, str]) -> None:
    client, _ = admin
    new = NewTopic("life", 2, 1, config={"retention.ms": "5000"})
    assert result(client.create_topics([new])) is None
    assert error_code(client.create_topics([NewTopic("life", 1, 1)])) == (
        KafkaError.TOPIC_ALREADY_EXISTS
    )
    assert result(client.create_topics([NewTopic("dry", 1, 1)], validate_only=True)) is None
    topics = client.list_topics(timeout=10).topics
    assert "dry" not in topics and len(topics["life"].partitions) == 2

    assert result(client.create_partitions([NewPartitions("life", 3)])) is None
    assert len(client.list_topics(timeout=10).topics["life"].partitions) == 3

    assert result(client.delete_topics(["life"])) is None
    assert error_code(client.delete_topics(["life"])) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_configs(admin: tuple[AdminClient, str]) -> None:
    client, _ = admin
    result(client.create_topics([NewTopic("conf", 1, 1, config={"retention.ms": "5000"})]))
    retention = topic_configs(client, "conf")["retention.ms"]
    assert (retention.value, retention.source) == ("5000", 1)  # DYNAMIC_TOPIC_CONFIG

    changes = [
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ]
    resource = ConfigResource(ResourceType.TOPIC, "conf", incremental_configs=changes)
    assert result(client.incremental_alter_configs([resource])) is None
    configs = topic_configs(client, "conf")
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].source == 5  # DEFAULT_CONFIG

    broker = result(client.describe_configs([ConfigResource(ResourceType.BROKER, "0")]))
    assert broker["listeners"].is_read_only
    change = [ConfigEntry("listeners", "x", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=change)
    assert error_code(client.incremental_alter_configs([resource])) == KafkaError.INVALID_REQUEST
    change = [ConfigEntry("log.retention.ms", "7", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=change)
    assert result(client.incremental_alter_configs([resource])) is None
    retention = result(client.describe_configs([ConfigResource(ResourceType.BROKER, "0")]))[
        "log.retention.ms"
    ]
    assert (retention.value, retention.source) == ("7", 2)  # DYNAMIC_BROKER_CONFIG
    change = [ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)]
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=change)
    assert result(client.incremental_alter_configs([resource])) is None


def test_delete_records_and_describe_cluster(admin: tuple[AdminClient, str]) -> None:
    client, bootstrap = admin
    result(client.create_topics([NewTopic("recs", 1, 1)]))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("recs", b"r%d" % i, partition=0)
    assert producer.flush(10) == 0
    deleted = result(client.delete_records([TopicPartition("recs", 0, 4)]))
    assert deleted.low_watermark == 4

    cluster = client.describe_cluster().result(timeout=10)
    assert [node.id for node in cluster.nodes] == [0]
    assert cluster.controller.id == 0
