"""Dynamic broker configs on three `kafkalite serve` brokers and a real ZooKeeper, altered with
Kafka's own `kafka-configs` (4.3 tools, compat/kafka_tools.py) through one broker: the
cluster-wide default reaches every broker, a per-broker override only its broker, both are
kept in ZooKeeper in Kafka's layout and survive restarts of every broker."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll, zk_read
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from compat.kafka_tools import run_tool
from kafkalite.cluster import zk_data as zd
from kafkalite.testing import BrokerProcess

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow

DEFAULT_VALUE, OVERRIDE_VALUE = "123456789", "4242424"
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value


Retention = tuple[str, int] | None


def retention(admin: AdminClient, broker_id: int) -> Retention:
    """`log.retention.ms` as broker `broker_id` describes itself (value, source); None when
    no level sets it (listed with a null value, as Kafka lists it)."""
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    configs = admin.describe_configs([resource], request_timeout=10)[resource].result(15)
    entry = configs["log.retention.ms"]
    return None if entry.value is None else (entry.value, entry.source)


def retentions(admin: AdminClient) -> dict[int, Retention]:
    return {broker_id: retention(admin, broker_id) for broker_id in (1, 2, 3)}


def configs_tool(bootstrap: str, *args: str) -> None:
    run = run_tool("kafka-configs", bootstrap, "--entity-type", "brokers", "--alter", *args)
    assert run.exit_code == 0, run.stdout + run.stderr


def znode(zk_connect: str, path: str) -> Any:
    async def read(kafka_zk: Any) -> Any:
        data, _ = await kafka_zk.zk.get(path)
        return json.loads(data)

    return zk_read(zk_connect, read)


def notifications(zk_connect: str) -> list[Any]:
    async def read(kafka_zk: Any) -> list[Any]:
        names = await kafka_zk.zk.children(zd.CONFIG_CHANGES)
        return [json.loads((await kafka_zk.zk.get(f"{zd.CONFIG_CHANGES}/{n}"))[0]) for n in names]

    return zk_read(zk_connect, read)


def test_default_reaches_every_broker_and_an_override_only_its_own(
    start_brokers: StartBrokers, zk_connect: str
) -> None:
    brokers: dict[int, BrokerProcess] = start_brokers({})
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    assert retentions(admin) == dict.fromkeys((1, 2, 3), None)

    configs_tool(
        brokers[1].bootstrap,
        *("--entity-default", "--add-config", f"log.retention.ms={DEFAULT_VALUE}"),
    )
    everywhere = dict.fromkeys((1, 2, 3), (DEFAULT_VALUE, DYNAMIC_DEFAULT))
    poll(lambda: retentions(admin) == everywhere, "the default on every broker")
    assert znode(zk_connect, "/config/brokers/<default>") == {
        "version": 1,
        "config": {"log.retention.ms": DEFAULT_VALUE},
    }
    assert notifications(zk_connect) == [{"version": 2, "entity_path": "brokers/<default>"}]

    configs_tool(
        brokers[1].bootstrap,
        *("--entity-name", "2", "--add-config", f"log.retention.ms={OVERRIDE_VALUE}"),
    )
    overridden = {**everywhere, 2: (OVERRIDE_VALUE, DYNAMIC_BROKER)}
    poll(lambda: retentions(admin) == overridden, "the override on broker 2")
    assert znode(zk_connect, "/config/brokers/2") == {
        "version": 1,
        "config": {"log.retention.ms": OVERRIDE_VALUE},
    }

    for broker in brokers.values():
        broker.restart()
    poll(lambda: retentions(admin) == overridden, "both kept across restarts")

    configs_tool(brokers[3].bootstrap, "--entity-default", "--delete-config", "log.retention.ms")
    restored = {1: None, 2: (OVERRIDE_VALUE, DYNAMIC_BROKER), 3: None}
    poll(lambda: retentions(admin) == restored, "the default removed everywhere")
