"""Topic administration through confluent-kafka's AdminClient, the same on kafkalite and Apache
Kafka: create/delete/describe topics, create partitions, describe/alter configs (incremental
and the legacy AlterConfigs), delete records, describe cluster.

Errors are compared by the name a client sees (`KafkaError.name()`), never by message text
(the brokers word their messages differently). Known kafkalite differences are strict xfails on
target kafkalite, one line each in compat/FINDINGS.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from compat.targets import Target
from tests.integration.e2e_helpers import wait_until

TIMEOUT = 20.0

# Kafka 4's defaults of topic configs both brokers serve (described with source DEFAULT_CONFIG).
TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "index.interval.bytes": "4096",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "preallocate": "false",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}

# Topic configs Kafka 4 describes that are outside kafkalite's scope (single node, no tiered
# storage, no replication): left out of the key-set comparison (FINDINGS.md: exclusions).
OUT_OF_SCOPE_TOPIC_CONFIGS = {
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "remote.copy.lag.bytes",
    "remote.copy.lag.ms",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
}


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def admin(target: Target) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": target.bootstrap})


def error_name(future: Any, timeout: float = TIMEOUT) -> str:
    """The name of the KafkaError an admin future fails with ("" when it succeeds)."""
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        return exc.args[0].name()
    return ""


def create_topic(
    admin: AdminClient, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    topic = NewTopic(name, partitions, 1, config=config or {})
    admin.create_topics([topic], operation_timeout=10)[name].result(timeout=TIMEOUT)
    # Kafka answers CreateTopics once its controller committed the topic; the broker's
    # metadata follows a moment later. Wait until Metadata shows every partition's leader.
    wait_until(lambda: partition_count(admin, name) == partitions, message=f"{name} in metadata")


def topic_configs(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)


ConfigState = dict[str, tuple[str | None, ConfigSource]]


def configs_when(admin: AdminClient, topic: str, expected: ConfigState) -> ConfigState:
    """(value, source) of the `expected` keys once they match, else as last described; an
    expected value None means any value (it is reported as None).

    Kafka answers an alter once its controller committed it; the broker describing the topic
    applies the change a moment later, so a reader polls (a no-op on kafkalite)."""

    def described() -> ConfigState:
        configs = topic_configs(admin, topic)
        return {
            key: (
                None if value is None else configs[key].value,
                ConfigSource(configs[key].source),
            )
            for key, (value, _) in expected.items()
        }

    deadline = time.monotonic() + TIMEOUT
    while (current := described()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return current


def alter(admin: AdminClient, topic: str, *ops: tuple[str, str, AlterConfigOpType], **kw: Any):
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    return admin.incremental_alter_configs([resource], **kw)[resource]


def partition_count(admin: AdminClient, topic: str) -> int:
    """Partitions with a leader, as Metadata shows them (0 while the topic is unknown)."""
    metadata = admin.list_topics(topic, timeout=TIMEOUT).topics[topic]
    return sum(1 for p in metadata.partitions.values() if p.error is None and p.leader >= 0)


def single_node_id(admin: AdminClient) -> int:
    cluster = admin.describe_cluster().result(timeout=TIMEOUT)
    assert len(cluster.nodes) == 1
    return cluster.nodes[0].id


def produce_values(target: Target, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
    errors: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            b"value-%d" % i,
            partition=partition,
            on_delivery=lambda err, msg: err and errors.append(err),
        )
    assert producer.flush(TIMEOUT) == 0
    assert errors == []


def earliest_offset(admin: AdminClient, topic: str, partition: int = 0) -> int:
    tp = TopicPartition(topic, partition)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=TIMEOUT).offset


def first_consumed_offset(target: Target, topic: str, partition: int = 0) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                return message.offset()
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


# -- create / describe / delete topics ------------------------------------------------------


def test_create_topic_and_describe(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    create_topic(admin, name, partitions=3)
    node = single_node_id(admin)

    description = admin.describe_topics(TopicCollection([name]))[name].result(timeout=TIMEOUT)
    assert description.name == name
    assert not description.is_internal
    assert description.topic_id is not None
    partitions = sorted(description.partitions, key=lambda p: p.id)
    assert [p.id for p in partitions] == [0, 1, 2]
    for partition in partitions:
        assert partition.leader.id == node
        assert [r.id for r in partition.replicas] == [node]
        assert [r.id for r in partition.isr] == [node]

    metadata = admin.list_topics(name, timeout=TIMEOUT).topics[name]
    assert metadata.error is None
    assert sorted(metadata.partitions) == [0, 1, 2]
    assert {p.leader for p in metadata.partitions.values()} == {node}


@pytest.mark.parametrize(
    ("case", "topic", "error"),
    [
        ("already-exists", dict(num_partitions=1), "TOPIC_ALREADY_EXISTS"),
        (
            "replication-factor-2",
            dict(num_partitions=1, replication_factor=2),
            "INVALID_REPLICATION_FACTOR",
        ),  # noqa: E501
        ("zero-partitions", dict(num_partitions=0), "INVALID_PARTITIONS"),
        (
            "bad-config-value",
            dict(num_partitions=1, config={"retention.ms": "abc"}),
            "INVALID_CONFIG",
        ),  # noqa: E501
        (
            "unknown-config",
            dict(num_partitions=1, config={"no.such.config": "1"}),
            "INVALID_CONFIG",
        ),  # noqa: E501
        ("illegal-name", dict(num_partitions=1), "TOPIC_EXCEPTION"),
    ],
)
def test_create_topic_errors(
    admin: AdminClient,
    topic_name: Callable[..., str],
    case: str,
    topic: dict[str, Any],
    error: str,
) -> None:
    name = topic_name()
    if case == "already-exists":
        create_topic(admin, name)
    if case == "illegal-name":
        name = f"bad name!{name}"
    future = admin.create_topics([NewTopic(name, **topic)], operation_timeout=10)[name]
    assert error_name(future) == error
    if case != "already-exists":
        assert name not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_topic_validate_only(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    futures = admin.create_topics([NewTopic(name, 2)], validate_only=True, operation_timeout=10)
    assert futures[name].result(timeout=TIMEOUT) is None
    assert name not in admin.list_topics(timeout=TIMEOUT).topics
    futures = admin.create_topics([NewTopic(name, 0)], validate_only=True, operation_timeout=10)
    assert error_name(futures[name]) == "INVALID_PARTITIONS"


def test_describe_unknown_topic(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    future = admin.describe_topics(TopicCollection([name]))[name]
    assert error_name(future) == "UNKNOWN_TOPIC_OR_PART"
    assert name not in admin.list_topics(timeout=TIMEOUT).topics  # describing creates nothing


def test_delete_topic(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    create_topic(admin, name, partitions=2)
    assert admin.delete_topics([name], operation_timeout=10)[name].result(timeout=TIMEOUT) is None
    wait_until(
        lambda: name not in admin.list_topics(timeout=TIMEOUT).topics, message="the topic to go"
    )
    assert error_name(admin.delete_topics([name], operation_timeout=10)[name]) == (
        "UNKNOWN_TOPIC_OR_PART"
    )
    # The name is free again: a new topic with other settings.
    create_topic(admin, name, partitions=1, config={"retention.ms": "60000"})
    assert partition_count(admin, name) == 1
    assert topic_configs(admin, name)["retention.ms"].value == "60000"


def test_delete_unknown_topic(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    future = admin.delete_topics([name], operation_timeout=10)[name]
    assert error_name(future) == "UNKNOWN_TOPIC_OR_PART"


# -- create partitions -----------------------------------------------------------------------


def test_create_partitions(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    create_topic(admin, name, partitions=1)

    futures = admin.create_partitions([NewPartitions(name, 4)], validate_only=True)
    assert futures[name].result(timeout=TIMEOUT) is None
    assert partition_count(admin, name) == 1

    futures = admin.create_partitions([NewPartitions(name, 3)], operation_timeout=10)
    assert futures[name].result(timeout=TIMEOUT) is None
    wait_until(lambda: partition_count(admin, name) == 3, message="3 partitions")
    description = admin.describe_topics(TopicCollection([name]))[name].result(timeout=TIMEOUT)
    assert sorted(p.id for p in description.partitions) == [0, 1, 2]

    for count in (2, 3):  # a decrease, and no increase
        future = admin.create_partitions([NewPartitions(name, count)])[name]
        assert error_name(future) == "INVALID_PARTITIONS"
    assert partition_count(admin, name) == 3


def test_create_partitions_unknown_topic(
    admin: AdminClient, topic_name: Callable[..., str]
) -> None:
    name = topic_name()
    future = admin.create_partitions([NewPartitions(name, 3)])[name]
    assert error_name(future) == "UNKNOWN_TOPIC_OR_PART"
    assert name not in admin.list_topics(timeout=TIMEOUT).topics


# -- describe configs -------------------------------------------------------------------------


def test_describe_topic_config_defaults(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    create_topic(admin, name, config={"retention.ms": "123456", "cleanup.policy": "compact"})
    configs = topic_configs(admin, name)
    for key, value in TOPIC_DEFAULTS.items():
        if key == "cleanup.policy":
            continue
        entry = configs[key]
        assert (entry.value, entry.source, entry.is_default) == (
            value,
            ConfigSource.DEFAULT_CONFIG.value,
            True,
        ), key
        assert not entry.is_read_only and not entry.is_sensitive, key
    for key, value in {"retention.ms": "123456", "cleanup.policy": "compact"}.items():
        entry = configs[key]
        assert (entry.value, entry.source, entry.is_default) == (
            value,
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
            False,
        ), key


def test_topic_config_default_retention_ms(
    target: Target, admin: AdminClient, topic_name: Callable[..., str]
) -> None:
    name = topic_name()
    create_topic(admin, name)
    entry = topic_configs(admin, name)["retention.ms"]
    # kafkalite keeps two weeks by design (log.retention.hours=336); Kafka one (168).
    expected = "1209600000" if target.name == "kafkalite" else "604800000"
    assert (entry.value, entry.source) == (expected, ConfigSource.DEFAULT_CONFIG.value)


def test_topic_config_default_timestamp_after_max_ms(
    admin: AdminClient, topic_name: Callable[..., str]
) -> None:
    name = topic_name()
    create_topic(admin, name)
    entry = topic_configs(admin, name)["message.timestamp.after.max.ms"]
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DEFAULT_CONFIG.value)


def test_topic_config_names(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    """Every topic config Kafka 4 describes (tiered storage and replication throttles aside)
    exists, so clients may set it."""
    name = topic_name()
    create_topic(admin, name)
    described = set(topic_configs(admin, name)) - OUT_OF_SCOPE_TOPIC_CONFIGS
    expected = set(TOPIC_DEFAULTS) | {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "errors.deadletterqueue.group.enable",  # KIP-1191
        "max.decompressed.message.bytes",
        "message.timestamp.after.max.ms",
        "min.insync.replicas",
        "retention.ms",
        "segment.jitter.ms",
    }
    assert sorted(expected - described) == []


def test_describe_configs_unknown_topic(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic_name())
    future = admin.describe_configs([resource])[resource]
    assert error_name(future) == "UNKNOWN_TOPIC_OR_PART"


def test_describe_broker_configs(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.BROKER, str(single_node_id(admin)))
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)
    # Set by compat.targets.COMMON_DEFAULTS on both brokers: from the static config.
    for key, value in {"num.partitions": "1", "offsets.topic.num.partitions": "5"}.items():
        assert (configs[key].value, configs[key].source) == (
            value,
            ConfigSource.STATIC_BROKER_CONFIG.value,
        ), key
    for key, value in {
        "message.max.bytes": "1048588",
        "auto.create.topics.enable": "true",
        "log.segment.bytes": "1073741824",
        "log.retention.bytes": "-1",
    }.items():
        assert (configs[key].value, configs[key].source) == (
            value,
            ConfigSource.DEFAULT_CONFIG.value,
        ), key


# -- alter configs ----------------------------------------------------------------------------


def test_incremental_alter_configs(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    create_topic(admin, name)
    set_, delete, append, subtract = (
        AlterConfigOpType.SET,
        AlterConfigOpType.DELETE,
        AlterConfigOpType.APPEND,
        AlterConfigOpType.SUBTRACT,
    )

    future = alter(admin, name, ("retention.ms", "5000", set_), validate_only=True)
    assert future.result(timeout=TIMEOUT) is None
    assert topic_configs(admin, name)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    future = alter(
        admin,
        name,
        ("retention.ms", "5000", set_),
        ("max.message.bytes", "2000000", set_),
        ("cleanup.policy", "compact", append),
    )
    assert future.result(timeout=TIMEOUT) is None
    dynamic, default = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG
    expected = {
        "retention.ms": ("5000", dynamic),
        "max.message.bytes": ("2000000", dynamic),
        "cleanup.policy": ("delete,compact", dynamic),
    }
    assert configs_when(admin, name, expected) == expected

    future = alter(
        admin, name, ("cleanup.policy", "delete", subtract), ("retention.ms", "", delete)
    )
    assert future.result(timeout=TIMEOUT) is None
    expected = {
        "retention.ms": (None, default),  # the broker's default (see the retention test)
        "max.message.bytes": ("2000000", dynamic),  # untouched
        "cleanup.policy": ("compact", dynamic),
    }
    assert configs_when(admin, name, expected) == expected


@pytest.mark.parametrize(
    ("case", "op", "error"),
    [
        ("bad-value", ("retention.ms", "soon", AlterConfigOpType.SET), "INVALID_CONFIG"),
        ("unknown-name", ("no.such.config", "1", AlterConfigOpType.SET), "INVALID_CONFIG"),
        ("unknown-topic", ("retention.ms", "5000", AlterConfigOpType.SET), "UNKNOWN_TOPIC_OR_PART"),
    ],
)
def test_incremental_alter_configs_errors(
    admin: AdminClient,
    topic_name: Callable[..., str],
    case: str,
    op: tuple[str, str, AlterConfigOpType],
    error: str,
) -> None:
    name = topic_name()
    if case != "unknown-topic":
        create_topic(admin, name)
    assert error_name(alter(admin, name, op)) == error
    if case != "unknown-topic":
        assert topic_configs(admin, name)["retention.ms"].source == (
            ConfigSource.DEFAULT_CONFIG.value
        )


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_legacy_alter_configs(admin: AdminClient, topic_name: Callable[..., str]) -> None:
    """AlterConfigs (API 33) replaces a resource's whole set of dynamic configs."""
    name = topic_name()
    create_topic(admin, name, config={"cleanup.policy": "compact"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "4242"})
    assert admin.alter_configs([resource])[resource].result(timeout=TIMEOUT) is None
    expected = {
        "retention.ms": ("4242", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "cleanup.policy": ("delete", ConfigSource.DEFAULT_CONFIG),
    }
    assert configs_when(admin, name, expected) == expected


# -- delete records -------------------------------------------------------------------------


def test_delete_records(target: Target, admin: AdminClient, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    create_topic(admin, name, partitions=2)
    produce_values(target, name, 10)

    def delete_before(offset: int, partition: int = 0) -> Any:
        tp = TopicPartition(name, partition, offset)
        return admin.delete_records([tp], operation_timeout=10)[tp]

    assert delete_before(4).result(timeout=TIMEOUT).low_watermark == 4
    assert earliest_offset(admin, name) == 4
    assert first_consumed_offset(target, name) == 4

    # Below the log start offset: nothing to do, the low watermark stays.
    assert delete_before(2).result(timeout=TIMEOUT).low_watermark == 4
    # Past the high watermark: an error, nothing deleted.
    assert error_name(delete_before(11)) == "OFFSET_OUT_OF_RANGE"
    assert earliest_offset(admin, name) == 4
    # -1 (OFFSET_END): everything up to the high watermark.
    assert delete_before(-1).result(timeout=TIMEOUT).low_watermark == 10
    assert earliest_offset(admin, name) == 10
    # An empty partition: deleting up to its high watermark (0) is a no-op.
    assert delete_before(0, partition=1).result(timeout=TIMEOUT).low_watermark == 0

    produce_values(target, name, 2)
    assert first_consumed_offset(target, name) == 10


# -- cluster ----------------------------------------------------------------------------------


def test_describe_cluster(target: Target, admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(timeout=TIMEOUT)
    assert len(cluster.nodes) == 1
    node = cluster.nodes[0]
    assert cluster.controller is not None and cluster.controller.id == node.id
    assert f"{node.host}:{node.port}" == target.bootstrap
    assert cluster.cluster_id and len(cluster.cluster_id) == 22
    brokers = admin.list_topics(timeout=TIMEOUT).brokers
    assert [(b.id, f"{b.host}:{b.port}") for b in brokers.values()] == [(node.id, target.bootstrap)]


# librdkafka asks for authorized operations in its Metadata request (v8-v10), not with
# DescribeCluster. With no authorizer Kafka answers with every operation of the resource type.


def test_describe_cluster_authorized_operations(admin: AdminClient) -> None:
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT)
    assert sorted(op.name for op in cluster.authorized_operations or []) == sorted(
        [
            "CREATE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
        ]
    )


def test_describe_topic_authorized_operations(
    admin: AdminClient, topic_name: Callable[..., str]
) -> None:
    name = topic_name()
    create_topic(admin, name)
    futures = admin.describe_topics(TopicCollection([name]), include_authorized_operations=True)
    description = futures[name].result(timeout=TIMEOUT)
    assert sorted(op.name for op in description.authorized_operations or []) == sorted(
        [
            "READ",
            "WRITE",
            "CREATE",
            "DELETE",
            "ALTER",
            "DESCRIBE",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
        ]
    )
