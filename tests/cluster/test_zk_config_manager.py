"""Dynamic broker configs in ZooKeeper (kafkalite.cluster.zk_config_manager) against a real
ZooKeeper: Kafka's layout (`/config/brokers/<entity>`, `/config/changes/config_change_<seq>`),
each broker following the changes that concern it, notifications written by Kafka's own
format, bad notifications skipped, old ones purged."""

from __future__ import annotations

import json

import pytest
import trio

from kafkalite.cluster import zk_config_manager as zcm
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient

pytestmark = pytest.mark.slow
WAIT = 30  # seconds: the bound of every wait for a change to arrive


class Follower:
    """A broker's ZkConfigManager and the changes it handed over, in order."""

    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self.changes: list[tuple[str, dict[str, str]]] = []
        self.manager = zcm.ZkConfigManager(zk, broker_id, self._on_change)
        self._arrived = trio.Event()

    def _on_change(self, entity: str, configs: dict[str, str]) -> None:
        self.changes.append((entity, configs))
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_for(self, count: int) -> list[tuple[str, dict[str, str]]]:
        with trio.fail_after(WAIT):
            while len(self.changes) < count:
                await self._arrived.wait()
        return self.changes


def test_change_number() -> None:
    assert zcm.change_number("config_change_0000000042") == 42
    assert zcm.change_number("config_change_") == -1
    assert zcm.change_number("isr_change_0000000001") == -1


def test_kafkas_layout_and_every_broker_follows_what_concerns_it(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk, trio.open_nursery() as nursery:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            await kafka_zk.set_entity_config("brokers", "1", {"log.retention.ms": "1"})
            one, two = Follower(zk, 1), Follower(zk, 2)
            assert await one.manager.read_broker_configs() == {
                "<default>": {},
                "1": {"log.retention.ms": "1"},
            }
            for follower in (one, two):
                await nursery.start(follower.manager.run)
            # A start processes the notifications already there (Kafka's init does too).
            assert await one.wait_for(1) == [("1", {"log.retention.ms": "1"})]

            # Each change is awaited before the next: a notification makes a broker re-read
            # the entity's znode, so a slow one would see only the latest content.
            default_set = ("<default>", {"message.max.bytes": "9"})
            await kafka_zk.set_entity_config("brokers", "<default>", {"message.max.bytes": "9"})
            assert await two.wait_for(1) == [default_set]
            assert await one.wait_for(2) == [("1", {"log.retention.ms": "1"}), default_set]
            await kafka_zk.set_entity_config("brokers", "2", {"log.retention.ms": "2"})
            await kafka_zk.set_entity_config("topics", "t", {"retention.ms": "3"})
            assert await two.wait_for(2) == [default_set, ("2", {"log.retention.ms": "2"})]
            default_gone: tuple[str, dict[str, str]] = ("<default>", {})
            await kafka_zk.set_entity_config("brokers", "<default>", {})
            assert (await two.wait_for(3))[2:] == [default_gone]
            assert (await one.wait_for(3))[2:] == [default_gone]
            assert (len(one.changes), len(two.changes)) == (3, 3)  # "2" and "t" not for one

            assert json.loads((await zk.get("/config/brokers/<default>"))[0]) == {
                "version": 1,
                "config": {},
            }
            names = await zk.children(zd.CONFIG_CHANGES)
            assert names == [f"config_change_{n:010d}" for n in range(5)]
            entity_paths = [
                json.loads((await zk.get(f"{zd.CONFIG_CHANGES}/{name}"))[0]) for name in names
            ]
            assert entity_paths == [
                {"version": 2, "entity_path": path}
                for path in (
                    "brokers/1",
                    "brokers/<default>",
                    "brokers/2",
                    "topics/t",
                    "brokers/<default>",
                )
            ]
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_notifications_as_kafka_writes_them_bad_ones_skipped_old_ones_purged(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            # What Kafka's AdminZkClient.changeBrokerConfig writes, byte for byte.
            await zk.create(
                "/config/brokers/<default>",
                b'{"version":1,"config":{"log.segment.bytes":"2000000"}}',
            )
            notification = f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}"
            await zk.create(notification, b"not json", sequence=True)
            await zk.create(notification, b'{"version":3,"entity_path":"x/y"}', sequence=True)
            await zk.create(
                notification, b'{"version":2,"entity_path":"brokers/<default>"}', sequence=True
            )
            follower = Follower(zk, 7)
            await follower.manager.process_notifications()
            assert follower.changes == [("<default>", {"log.segment.bytes": "2000000"})]
            assert follower.manager.last_executed_change == 2
            assert len(await zk.children(zd.CONFIG_CHANGES)) == 3  # none 15 minutes old

            monkeypatch.setattr(zcm, "CHANGE_EXPIRATION_MS", -1)  # every one is old now
            await follower.manager.process_notifications()
            assert await zk.children(zd.CONFIG_CHANGES) == []
            assert len(follower.changes) == 1  # nothing processed twice

    trio.run(main)
