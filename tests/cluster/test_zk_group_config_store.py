"""Group configs in ZooKeeper (kafkalite.cluster.zk_group_config_store) against a real
ZooKeeper: Kafka's config layout (`/config/groups/<sanitized group>`, the `/config/changes`
notification of entity path `groups/<group>`), another broker following through its
ZkConfigManager, and a broker started later reading them."""

from __future__ import annotations

import json

import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zk_config_manager import ZkConfigManager
from kafkalite.cluster.zk_group_config_store import ZkGroupConfigStore

GROUP = "queue workers"  # sanitized as Kafka's Sanitizer does: queue%20workers
EARLIEST = {"share.auto.offset.reset": "earliest"}


async def until(condition: object) -> None:
    with trio.fail_after(10):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.02)


def test_group_configs_in_kafkas_layout_followed_by_another_broker(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk_a, ZkClient.open(zk_connect) as zk_b:
            await KafkaZkClient(zk_a).create_top_level_paths()
            broker_a = await ZkGroupConfigStore.open(KafkaZkClient(zk_a))
            broker_b = await ZkGroupConfigStore.open(KafkaZkClient(zk_b))
            assert broker_b.group_configs() == {}
            follower = ZkConfigManager(zk_b, 2, lambda _entity, _configs: None)
            follower.follow(zd.GROUPS, broker_b.on_group_config_changed)
            async with trio.open_nursery() as nursery:
                await nursery.start(follower.run)
                await broker_a.set_group_configs(GROUP, EARLIEST)
                assert broker_a.group_configs() == {GROUP: EARLIEST}
                await until(lambda: broker_b.group_configs() == {GROUP: EARLIEST})

                data, _ = await zk_a.get("/config/groups/queue%20workers")
                assert json.loads(data) == {"version": 1, "config": EARLIEST}
                changes = sorted(await zk_a.children(zd.CONFIG_CHANGES))
                latest, _ = await zk_a.get(f"{zd.CONFIG_CHANGES}/{changes[-1]}")
                assert json.loads(latest) == {
                    "version": 2,
                    "entity_path": "groups/queue%20workers",
                }
                before = broker_b.group_configs()[GROUP]
                limited = {**EARLIEST, "share.delivery.count.limit": "3"}
                await broker_a.set_group_configs(GROUP, limited)
                await until(lambda: len(broker_b.group_configs()[GROUP]) == 2)
                assert broker_b.group_configs()[GROUP] is not before  # replaced, not changed

                await broker_a.set_group_configs(GROUP, {})  # every config deleted
                await until(lambda: broker_b.group_configs() == {})
                nursery.cancel_scope.cancel()
            await broker_a.set_group_configs("other", EARLIEST)
            reopened = await ZkGroupConfigStore.open(KafkaZkClient(zk_b))
            assert reopened.group_configs() == {"other": EARLIEST}

    trio.run(main)
