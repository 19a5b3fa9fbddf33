"""A share group administered while confluent-kafka's ShareConsumer reads: its offsets
described (start offset and lag), reset to the earliest and deleted with Apache Kafka's own
kafka-share-groups (4.3, compat/kafka_tools.py), the records read again by its
kafka-console-share-consumer (each tool run is a JVM: four runs only); its group configs, with
confluent-kafka's AdminClient on GROUP resources, validated with Kafka's messages, described
with their sources, kept across a restart and used (`share.auto.offset.reset=earliest` reads
what was produced before).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from compat.cli_runner import kafkalite_here, ok_json
from compat.kafka_tools import run_tool
from kafkalite.testing import EmbeddedBroker, free_ports
from kafkalite.tools.broker_metrics import scrape

DEADLINE = 20.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    (metrics_port,) = free_ports(1)
    overrides = {
        "group.share.heartbeat.interval.ms": "500",
        "kafkalite.metrics.port": str(metrics_port),
    }
    with EmbeddedBroker(tmp_path / "data", overrides) as running:
        running.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
        yield running


def group_metrics(broker: EmbeddedBroker, group: str) -> dict[str, float]:
    """The group's share metrics: sample name (with its ackType, if any) -> value."""
    names = (
        "kafka_server_sharegroupmetrics_recordacknowledgements",
        "kafkalite_sharegroup_acquiredrecords",
        "kafkalite_sharegroup_archivedrecords",
        "kafka_server_sharepartitionmetrics_inflightmessagecount",
    )
    samples = scrape([broker.metrics_url], names, DEADLINE)  # type: ignore[attr-defined]
    return {
        s.name + s.labels.get("acktype", ""): s.value
        for family in samples.values()
        for s in family
        if s.labels.get("group") == group
    }


def start_offset(broker: EmbeddedBroker, group: str) -> int:
    states = broker.call(lambda: broker.broker.share_groups.partitions.coordinator.states)
    return next(state.start_offset for key, state in states.items() if key.group_id == group)


def consume(broker: EmbeddedBroker, group: str, topic: str, count: int) -> list[int]:
    """The offsets a ShareConsumer receives, polling (its next poll accepts what the last
    one returned) until `count` are received and acknowledged; it then closes, leaving the
    group empty (librdkafka's close does not acknowledge: what it holds is released)."""
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    offsets: list[int] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(offsets) < count or start_offset(broker, group) < max(offsets) + 1:
            assert time.monotonic() < deadline, f"received {offsets}"
            offsets.extend(m.offset() for m in consumer.poll(0.2) if m.error() is None)
    finally:
        consumer.close()
    return offsets


def share_groups_tool(broker: EmbeddedBroker, *args: str) -> list[list[str]]:
    """kafka-share-groups' output, as the words of each non-empty line."""
    run = run_tool("kafka-share-groups", broker.bootstrap, *args)
    assert run.exit_code == 0, run.stderr
    return [line.split() for line in run.stdout.splitlines() if line.strip()]


def group_resource(group: str, **configs: str | None) -> ConfigResource:
    """A GROUP resource with SET (a value) or DELETE (None) operations."""
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.SET if value else AlterConfigOpType.DELETE,
        )
        for name, value in configs.items()
    ]
    return ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)


def alter(admin: AdminClient, resource: ConfigResource, validate_only: bool = False) -> str:
    """The error message of the alteration ("" when it succeeded)."""
    future = admin.incremental_alter_configs([resource], validate_only=validate_only)[resource]
    try:
        future.result(DEADLINE)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.INVALID_CONFIG
        return str(exc.args[0].str())
    return ""


def described(admin: AdminClient, group: str) -> dict[str, tuple[str, ConfigSource]]:
    resource = ConfigResource(ResourceType.GROUP, group)
    entries = admin.describe_configs([resource])[resource].result(DEADLINE)
    return {name: (e.value, ConfigSource(e.source)) for name, e in entries.items()}


def test_a_group_reading_from_the_earliest_has_its_offsets_described_reset_and_deleted(
    broker: EmbeddedBroker,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"jobs-{suffix}", f"workers-{suffix}"
    broker.create_topic(topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert alter(admin, group_resource(group, share_auto_offset_reset="earliest")) == ""
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(DEADLINE) == 0
    assert sorted(consume(broker, group, topic, 5)) == [0, 1, 2, 3, 4]
    metrics = group_metrics(broker, group)
    assert metrics["kafka_server_sharegroupmetrics_recordacknowledgements_totalAccept"] == 5
    assert metrics["kafkalite_sharegroup_acquiredrecords_total"] == 5
    assert metrics["kafkalite_sharegroup_archivedrecords_total"] == 0
    assert metrics["kafka_server_sharepartitionmetrics_inflightmessagecount"] == 0
    describe = ["--describe", "--group", group, "--offsets"]
    assert share_groups_tool(broker, *describe) == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        [group, topic, "0", "5", "0"],
    ]
    # kafkalite's own CLI: listed with its type, described with the same offsets.
    cli = ["--bootstrap", broker.bootstrap, "--format", "json"]
    listed = ok_json(kafkalite_here("group", "list", *cli))
    assert {"group": group, "state": "EMPTY", "type": "share", "protocol_type": "share"} in listed
    (described,) = ok_json(kafkalite_here("group", "describe", group, *cli))
    assert (described["type"], described["state"], described["members"]) == ("share", "EMPTY", [])
    assert [
        (o["topic"], o["partition"], o["start_offset"], o["lag"]) for o in described["offsets"]
    ] == [(topic, 0, 5, 0)]
    reset = ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"]
    assert share_groups_tool(broker, *reset) == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [group, topic, "0", "0"],
    ]
    # Read again, by Kafka's console share consumer (it acknowledges what it printed).
    console = ["--topic", topic, "--group", group, "--max-messages", "5"]
    console += ["--formatter-property", "print.offset=true"]
    printed = run_tool("kafka-console-share-consumer", broker.bootstrap, *console)
    assert sorted(printed.stdout.split()) == [
        *(f"Offset:{i}" for i in range(5)),
        *(f"v{i}" for i in range(5)),
    ]
    assert start_offset(broker, group) == 5
    assert share_groups_tool(broker, "--delete-offsets", "--group", group, "--topic", topic) == [
        ["TOPIC", "STATUS"],
        [topic, "Successful"],
    ]
    states = broker.call(lambda: broker.broker.share_groups.partitions.coordinator.states)
    assert not [key for key in states if key.group_id == group]


def test_group_configs_are_validated_described_and_kept_across_a_restart(tmp_path: Path) -> None:
    data, group = tmp_path / "data", "workers"
    static = {"group.share.delivery.count.limit": "4"}
    with EmbeddedBroker(data, static) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert described(admin, group) == {
            "errors.deadletterqueue.copy.record.enable": ("false", ConfigSource.DEFAULT_CONFIG),
            "errors.deadletterqueue.topic.name": ("", ConfigSource.DEFAULT_CONFIG),
            "share.auto.offset.reset": ("latest", ConfigSource.DEFAULT_CONFIG),
            "share.delivery.count.limit": ("4", ConfigSource.STATIC_BROKER_CONFIG),
            "share.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG),
            "share.isolation.level": ("read_uncommitted", ConfigSource.DEFAULT_CONFIG),
            "share.partition.max.record.locks": ("2000", ConfigSource.DEFAULT_CONFIG),
            "share.record.lock.duration.ms": ("30000", ConfigSource.DEFAULT_CONFIG),
            "share.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG),
        }
        # Kafka's messages; nothing of a refused request is stored.
        refusals = {
            "share.record.lock.duration.ms": (
                "1000",
                "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
            ),
            "share.delivery.count.limit": (
                "1",
                "Invalid value 1 for configuration share.delivery.count.limit: Value must be at "
                "least 2",
            ),
            "share.session.timeout.ms": (
                "x",
                "Invalid value x for configuration share.session.timeout.ms: Not a number of "
                "type INT",
            ),
            "share.isolation.level": (
                "none",
                "Invalid value none for configuration share.isolation.level: String must be one "
                "of: read_committed, read_uncommitted",
            ),
            "share.auto.offset.reset": (
                "by_duration:-PT1H",
                "Invalid value `by_duration:-PT1H` for configuration share.auto.offset.reset. "
                "The value must be either 'earliest', 'latest' or of the format "
                "'by_duration:<PnDTnHnMn.nS>'.",
            ),
            "no.such.config": ("1", "Unknown group config name: no.such.config"),
        }
        for name, (value, message) in refusals.items():
            assert alter(admin, group_resource(group, **{name: value})) == message
        assert alter(admin, group_resource(group, share_auto_offset_reset="earliest"), True) == ""
        assert described(admin, group)["share.auto.offset.reset"][0] == "latest"
        changes = {"share_auto_offset_reset": "by_duration:PT1H", "share_delivery_count_limit": "3"}
        assert alter(admin, group_resource(group, **changes)) == ""
        assert alter(admin, group_resource(group, share_record_lock_duration_ms="20000")) == ""
    with EmbeddedBroker(data, static) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = described(admin, group)
        assert configs["share.auto.offset.reset"] == ("by_duration:PT1H", ConfigSource.GROUP_CONFIG)
        assert configs["share.delivery.count.limit"] == ("3", ConfigSource.GROUP_CONFIG)
        assert configs["share.record.lock.duration.ms"] == ("20000", ConfigSource.GROUP_CONFIG)
        settings = broker.call(lambda: broker.broker.group_configs.settings(group))
        assert (settings.delivery_count_limit, settings.record_lock_duration_ms) == (3, 20000)
        assert settings.auto_offset_reset.duration_ms == 3_600_000
        assert alter(admin, group_resource(group, share_delivery_count_limit=None)) == ""
        assert described(admin, group)["share.delivery.count.limit"] == (
            "4",
            ConfigSource.STATIC_BROKER_CONFIG,
        )
