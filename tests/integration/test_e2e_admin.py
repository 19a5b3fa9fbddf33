"""Every admin API through confluent-kafka's AdminClient against a real broker:
CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs,
DeleteRecords and DescribeCluster."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from e2e_helpers import (
    CLIENT_TIMEOUT,
    admin,
    consume_all,
    create_topic,
    first_error,
    partition_dir,
    produce_all,
    producer,
    wait_until,
    watermarks,
)

from kafkalite.testing import BrokerProcess

BROKER_OVERRIDES = {
    "log.retention.check.interval.ms": "60000",
    "log.retention.hours": "100",
    "message.max.bytes": "2000000",
}


@pytest.fixture(scope="module")
def admin_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(BROKER_OVERRIDES)


def _error_of(future: object) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=CLIENT_TIMEOUT)  # type: ignore[attr-defined]
    return info.value.args[0]


def _topics(bootstrap: str) -> dict:
    return admin(bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics


# -- CreateTopics ----------------------------------------------------------------------------


def test_create_topics_with_configs(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    client = admin(admin_broker.bootstrap)
    config = {"retention.ms": "123456", "cleanup.policy": "delete", "max.message.bytes": "5000"}
    futures = client.create_topics([NewTopic(topic, 4, 1, config=config)], operation_timeout=10)
    assert futures[topic].result(timeout=CLIENT_TIMEOUT) is None
    metadata = _topics(admin_broker.bootstrap)[topic]
    assert sorted(metadata.partitions) == [0, 1, 2, 3]
    for partition in range(4):
        assert partition_dir(admin_broker.data_dir, topic, partition).is_dir()
    described = _describe_topic(admin_broker.bootstrap, topic)
    assert described["retention.ms"].value == "123456"
    assert described["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["max.message.bytes"].value == "5000"
    # max.message.bytes applies: a bigger message is refused.
    prod = producer(admin_broker.bootstrap, **{"linger.ms": 0})
    errors = []
    prod.produce(topic, value=b"x" * 20_000, partition=0, on_delivery=lambda e, m: errors.append(e))
    assert prod.flush(CLIENT_TIMEOUT) == 0
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_create_topics_broker_defaults(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    """NewTopic without counts sends -1/-1: the broker's num.partitions and
    default.replication.factor apply."""
    broker = broker_factory({"num.partitions": "3"})
    topic = topic_name()
    futures = admin(broker.bootstrap).create_topics([NewTopic(topic)])
    assert futures[topic].result(timeout=CLIENT_TIMEOUT) is None
    partitions = _topics(broker.bootstrap)[topic].partitions
    assert sorted(partitions) == [0, 1, 2]
    assert all(list(p.replicas) == [0] for p in partitions.values())


def test_create_topics_validate_only(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    client = admin(admin_broker.bootstrap)
    futures = client.create_topics([NewTopic(topic, 2, 1)], validate_only=True)
    assert futures[topic].result(timeout=CLIENT_TIMEOUT) is None
    assert topic not in _topics(admin_broker.bootstrap)
    assert not partition_dir(admin_broker.data_dir, topic, 0).exists()
    # validate_only still validates.
    bad = client.create_topics(
        [NewTopic(topic, 1, 1, config={"retention.ms": "soon"})], validate_only=True
    )
    assert _error_of(bad[topic]).code() == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize("name", ["bad name", "a/b", "..", "x" * 250])
def test_create_topics_invalid_name(admin_broker: BrokerProcess, name: str) -> None:
    futures = admin(admin_broker.bootstrap).create_topics([NewTopic(name, 1, 1)])
    assert _error_of(futures[name]).code() == KafkaError.TOPIC_EXCEPTION


def test_create_topics_already_exists(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(admin_broker.bootstrap, topic, 1)
    futures = admin(admin_broker.bootstrap).create_topics([NewTopic(topic, 3, 1)])
    assert _error_of(futures[topic]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert len(_topics(admin_broker.bootstrap)[topic].partitions) == 1


@pytest.mark.parametrize(
    ("partitions", "replication", "config", "code"),
    [
        (0, 1, {}, KafkaError.INVALID_PARTITIONS),
        (1, 3, {}, KafkaError.INVALID_REPLICATION_FACTOR),
        (1, 1, {"no.such.config": "1"}, KafkaError.INVALID_CONFIG),
        (1, 1, {"retention.ms": "abc"}, KafkaError.INVALID_CONFIG),
        (1, 1, {"cleanup.policy": "shred"}, KafkaError.INVALID_CONFIG),
    ],
)
def test_create_topics_invalid_arguments(
    admin_broker: BrokerProcess,
    topic_name: Callable[..., str],
    partitions: int,
    replication: int,
    config: dict,
    code: int,
) -> None:
    topic = topic_name()
    futures = admin(admin_broker.bootstrap).create_topics(
        [NewTopic(topic, partitions, replication, config=config)]
    )
    assert _error_of(futures[topic]).code() == code
    assert topic not in _topics(admin_broker.bootstrap)


def test_create_topics_several_at_once(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    good, bad = topic_name("good"), "bad name!"
    futures = admin(admin_broker.bootstrap).create_topics(
        [NewTopic(good, 2, 1), NewTopic(bad, 1, 1)]
    )
    assert futures[good].result(timeout=CLIENT_TIMEOUT) is None
    assert _error_of(futures[bad]).code() == KafkaError.TOPIC_EXCEPTION


# -- DeleteTopics ----------------------------------------------------------------------------


def test_delete_topics(admin_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    produce_all(
        producer(bootstrap), topic, ({"value": b"v", "partition": i % 2} for i in range(10))
    )
    futures = admin(bootstrap).delete_topics([topic], operation_timeout=10)
    assert futures[topic].result(timeout=CLIENT_TIMEOUT) is None
    assert topic not in _topics(bootstrap)

    def removed() -> bool:
        return not any(
            entry.name.startswith(f"{topic}-") for entry in admin_broker.data_dir.iterdir()
        )

    wait_until(removed, message=f"the data dirs of {topic} to be removed")
    # Unknown now.
    again = admin(bootstrap).delete_topics([topic])
    assert _error_of(again[topic]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name can be reused, and the new topic starts empty.
    create_topic(bootstrap, topic, 1)
    assert watermarks(bootstrap, topic, 0) == (0, 0)


def test_delete_unknown_topic(admin_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    futures = admin(admin_broker.bootstrap).delete_topics([topic])
    assert _error_of(futures[topic]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_admin_changes_survive_restart(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """Deleted topics stay deleted; added partitions, altered configs and moved log start
    offsets are all still there after a clean restart and after kill -9."""
    gone, kept = topic_name("gone"), topic_name("kept")
    bootstrap = broker.bootstrap
    create_topic(bootstrap, gone, 1)
    create_topic(bootstrap, kept, 1, {"retention.ms": "86400000"})
    client = admin(bootstrap)
    client.delete_topics([gone])[gone].result(timeout=CLIENT_TIMEOUT)
    client.create_partitions([NewPartitions(kept, 3)])[kept].result(timeout=CLIENT_TIMEOUT)
    _alter_topic(
        client,
        kept,
        ("retention.bytes", "123456789", AlterConfigOpType.SET),
        ("retention.ms", None, AlterConfigOpType.DELETE),
    ).result(CLIENT_TIMEOUT)
    produce_all(producer(bootstrap), kept, ({"value": b"v", "partition": 2} for _ in range(10)))
    tp = TopicPartition(kept, 2, 4)
    client.delete_records([tp])[tp].result(timeout=CLIENT_TIMEOUT)

    for restart in (broker.restart, lambda: (broker.kill(), broker.start())):
        restart()
        topics = _topics(broker.bootstrap)
        assert gone not in topics
        assert sorted(topics[kept].partitions) == [0, 1, 2]
        configs = _describe_topic(broker.bootstrap, kept)
        assert configs["retention.bytes"].value == "123456789"
        assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert watermarks(broker.bootstrap, kept, 2) == (4, 10)


# -- CreatePartitions ------------------------------------------------------------------------


def test_create_partitions(admin_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    client = admin(bootstrap)
    futures = client.create_partitions([NewPartitions(topic, 5)], operation_timeout=10)
    assert futures[topic].result(timeout=CLIENT_TIMEOUT) is None
    assert sorted(_topics(bootstrap)[topic].partitions) == [0, 1, 2, 3, 4]
    assert partition_dir(admin_broker.data_dir, topic, 4).is_dir()
    deliveries = produce_all(
        producer(bootstrap, **{"topic.metadata.refresh.interval.ms": 100}),
        topic,
        ({"value": b"p%d" % p, "partition": p} for p in range(5)),
    )
    assert {(d.partition, d.offset) for d in deliveries.succeeded} == {(p, 0) for p in range(5)}
    consumed = consume_all(bootstrap, topic, range(5))
    assert {p: [c.value for c in consumed[p]] for p in range(5)} == {
        p: [b"p%d" % p] for p in range(5)
    }
    # Fewer or equal partitions are refused; unknown topics too.
    for count in (5, 3):
        fewer = client.create_partitions([NewPartitions(topic, count)])
        assert _error_of(fewer[topic]).code() == KafkaError.INVALID_PARTITIONS
    missing = topic_name("missing")
    unknown = client.create_partitions([NewPartitions(missing, 3)])
    assert _error_of(unknown[missing]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions_validate_only(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(admin_broker.bootstrap, topic, 1)
    futures = admin(admin_broker.bootstrap).create_partitions(
        [NewPartitions(topic, 3)], validate_only=True
    )
    assert futures[topic].result(timeout=CLIENT_TIMEOUT) is None
    assert sorted(_topics(admin_broker.bootstrap)[topic].partitions) == [0]


# -- DescribeConfigs / IncrementalAlterConfigs -------------------------------------------------


def _describe(bootstrap: str, resource: ConfigResource) -> dict[str, ConfigEntry]:
    futures = admin(bootstrap).describe_configs([resource], request_timeout=10)
    (future,) = futures.values()
    return future.result(timeout=CLIENT_TIMEOUT)


def _describe_topic(bootstrap: str, topic: str) -> dict[str, ConfigEntry]:
    return _describe(bootstrap, ConfigResource(ConfigResource.Type.TOPIC, topic))


def _alter_topic(
    client: AdminClient, topic: str, *changes: tuple[str, str | None, AlterConfigOpType]
) -> Future:
    """IncrementalAlterConfigs of (name, value, operation) on one topic: the result's future."""
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in changes]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    (future,) = client.incremental_alter_configs([resource]).values()
    return future


def test_describe_configs_topic(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(admin_broker.bootstrap, topic, 1, {"segment.bytes": "1048576"})
    configs = _describe_topic(admin_broker.bootstrap, topic)
    # Topic override.
    assert configs["segment.bytes"].value == "1048576"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # From the broker's command line (log.retention.hours=100).
    assert configs["retention.ms"].value == str(100 * 3_600_000)
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    # Kafka's defaults.
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.bytes"].value == "-1"
    assert configs["min.insync.replicas"].value == "1"
    for entry in configs.values():
        assert not entry.is_sensitive


def test_describe_configs_topic_synonyms(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(admin_broker.bootstrap, topic, 1, {"retention.ms": "5000"})
    # librdkafka always asks for synonyms (DescribeConfigs v1+ include_synonyms=true).
    configs = _describe_topic(admin_broker.bootstrap, topic)
    # confluent-kafka keys synonyms by name, so of log.retention.hours (static "100", then
    # its default) only one survives here; protocol_tests check the full list.
    synonyms = configs["retention.ms"].synonyms
    assert list(synonyms)[0] == "retention.ms"
    assert synonyms["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert synonyms["retention.ms"].value == "5000"
    assert "log.retention.hours" in synonyms


def test_describe_configs_unknown_topic(admin_broker: BrokerProcess) -> None:
    futures = admin(admin_broker.bootstrap).describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic-anywhere")]
    )
    error = _error_of(next(iter(futures.values())))
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_broker(admin_broker: BrokerProcess) -> None:
    configs = _describe(admin_broker.bootstrap, ConfigResource(ConfigResource.Type.BROKER, "0"))
    check = configs["log.retention.check.interval.ms"]
    assert (check.value, check.source) == ("60000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["message.max.bytes"].value == "2000000"
    assert configs["message.max.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].value == "1"  # the conftest default override
    partitions_default = configs["default.replication.factor"]
    assert (partitions_default.value, partitions_default.source) == (
        "1",
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert configs["log.dirs"].value == str(admin_broker.data_dir)


def test_incremental_alter_configs(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic, 1, {"segment.bytes": "1048576"})
    client = admin(bootstrap)
    future = _alter_topic(
        client,
        topic,
        ("retention.ms", "86400000", AlterConfigOpType.SET),
        ("retention.bytes", "999999", AlterConfigOpType.SET),
        ("segment.bytes", None, AlterConfigOpType.DELETE),
    )
    assert future.result(timeout=CLIENT_TIMEOUT) is None
    configs = _describe_topic(bootstrap, topic)
    assert configs["retention.ms"].value == "86400000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.bytes"].value == "999999"
    assert configs["segment.bytes"].value == str(1024**3)  # back to the default
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    # APPEND / SUBTRACT on a list config.
    _alter_topic(client, topic, ("cleanup.policy", "compact", AlterConfigOpType.APPEND)).result(
        CLIENT_TIMEOUT
    )
    assert _describe_topic(bootstrap, topic)["cleanup.policy"].value == "delete,compact"
    _alter_topic(client, topic, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)).result(
        CLIENT_TIMEOUT
    )
    assert _describe_topic(bootstrap, topic)["cleanup.policy"].value == "compact"

    # Later alterations keep the earlier ones (persistence: test_admin_changes_survive_restart).
    assert _describe_topic(bootstrap, topic)["retention.ms"].value == "86400000"


def test_incremental_alter_configs_invalid(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(admin_broker.bootstrap, topic, 1)
    client = admin(admin_broker.bootstrap)
    for name, value in (("retention.ms", "not-a-number"), ("no.such.config", "1")):
        future = _alter_topic(client, topic, (name, value, AlterConfigOpType.SET))
        assert _error_of(future).code() == KafkaError.INVALID_CONFIG, name
    assert _describe_topic(admin_broker.bootstrap, topic)["retention.ms"].source == (
        ConfigSource.STATIC_BROKER_CONFIG.value
    )
    future = _alter_topic(
        client, topic_name("missing"), ("retention.ms", "1000", AlterConfigOpType.SET)
    )
    assert _error_of(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_altered_retention_takes_effect(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    """Lowering retention.bytes at runtime makes the next retention check delete data."""
    broker = broker_factory({"log.retention.check.interval.ms": "200"})
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": "1024"})
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(prod, topic, ({"value": b"y" * 200, "partition": 0} for _ in range(30)))
    assert watermarks(broker.bootstrap, topic, 0) == (0, 30)
    _alter_topic(
        admin(broker.bootstrap), topic, ("retention.bytes", "1500", AlterConfigOpType.SET)
    ).result(timeout=CLIENT_TIMEOUT)
    wait_until(
        lambda: watermarks(broker.bootstrap, topic, 0)[0] > 0, message="retention after alter"
    )


# -- DeleteRecords ---------------------------------------------------------------------------


def test_delete_records(admin_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic, 1)
    produce_all(
        producer(bootstrap), topic, ({"value": b"r%d" % i, "partition": 0} for i in range(20))
    )
    client = admin(bootstrap)
    tp = TopicPartition(topic, 0, 8)
    result = client.delete_records([tp], operation_timeout=10)[tp].result(timeout=CLIENT_TIMEOUT)
    assert result.low_watermark == 8
    assert watermarks(bootstrap, topic, 0) == (8, 20)

    # Below the low watermark: an error with auto.offset.reset=error ...
    error, _ = first_error(bootstrap, topic, 0, 3, **{"auto.offset.reset": "error"})
    assert error is not None
    assert error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
    # ... and a reset to the earliest offset with auto.offset.reset=earliest.
    _, offsets = first_error(bootstrap, topic, 0, 3, **{"auto.offset.reset": "earliest"})
    assert offsets == [8]
    consumed = consume_all(bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == [b"r%d" % i for i in range(8, 20)]

    # Never backwards; beyond the high watermark is out of range; -1 means the end.
    back = TopicPartition(topic, 0, 4)
    again = client.delete_records([back])[back].result(timeout=CLIENT_TIMEOUT)
    assert again.low_watermark == 8
    beyond = TopicPartition(topic, 0, 21)
    assert _error_of(client.delete_records([beyond])[beyond]).code() == (
        KafkaError.OFFSET_OUT_OF_RANGE
    )
    to_end = TopicPartition(topic, 0, -1)
    done = client.delete_records([to_end])[to_end].result(timeout=CLIENT_TIMEOUT)
    assert done.low_watermark == 20
    assert watermarks(bootstrap, topic, 0) == (20, 20)


def test_delete_records_survives_restart(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1)
    produce_all(producer(broker.bootstrap), topic, ({"value": b"v"} for _ in range(10)))
    tp = TopicPartition(topic, 0, 6)
    admin(broker.bootstrap).delete_records([tp])[tp].result(timeout=CLIENT_TIMEOUT)
    broker.restart()
    assert watermarks(broker.bootstrap, topic, 0) == (6, 10)
    consumed = consume_all(broker.bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == [6, 7, 8, 9]


def test_delete_records_unknown_partition(
    admin_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(admin_broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 3, 0)
    futures = admin(admin_broker.bootstrap).delete_records([tp])
    # librdkafka looks up partition leaders from Metadata first and fails locally (_NOENT)
    # when the partition does not exist, before sending DeleteRecords.
    assert _error_of(futures[tp]).code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._NOENT)
    assert watermarks(admin_broker.bootstrap, topic, 0) == (0, 0)


# -- DescribeCluster -------------------------------------------------------------------------


def test_describe_cluster(admin_broker: BrokerProcess) -> None:
    description = (
        admin(admin_broker.bootstrap)
        .describe_cluster(request_timeout=10)
        .result(timeout=CLIENT_TIMEOUT)
    )
    assert description.cluster_id
    (node,) = description.nodes
    assert (node.id, node.host, node.port) == (0, admin_broker.host, admin_broker.port)
    assert description.controller is not None
    assert description.controller.id == 0
    # The same cluster id Metadata reports, and it is stable across clients.
    metadata = admin(admin_broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT)
    assert metadata.cluster_id == description.cluster_id


def test_cluster_id_stable_across_restart(broker: BrokerProcess) -> None:
    before = admin(broker.bootstrap).describe_cluster().result(timeout=CLIENT_TIMEOUT).cluster_id
    broker.restart()
    after = admin(broker.bootstrap).describe_cluster().result(timeout=CLIENT_TIMEOUT).cluster_id
    assert before == after
