"""Client quotas in ZooKeeper (kafkalite.cluster.zk_quota_store) against a real ZooKeeper:
Kafka's layout (`/config/users/<user>`, `/config/clients/<client>`,
`/config/users/<user>/clients/<client>`, `/config/ips/<ip>`, defaults as `<default>`), a
user's SCRAM credential left as it is, and another broker following through its
ZkConfigManager into its listener."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import trio

from kafkalite.broker.client_quotas import Entity, entity_of
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zk_config_manager import ZkConfigManager
from kafkalite.cluster.zk_quota_store import CLIENTS, IPS, ZkClientQuotaStore
from kafkalite.cluster.zk_scram_store import USERS

SCRAM = {"SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}
BOB = entity_of([("user", "bob@example.com")])  # sanitized as Kafka does: bob%40example.com
PAIR = entity_of([("user", "bob@example.com"), ("client-id", None)])
CLIENT_DEFAULT = entity_of([("client-id", None)])
IP = entity_of([("ip", "10.0.0.1")])


class Seen:
    def __init__(self) -> None:
        self.quotas: dict[Entity, Mapping[str, float]] = {}

    def on_client_quota_changed(self, entity: Entity, quotas: Mapping[str, float]) -> None:
        self.quotas[entity] = quotas


async def until(condition: object) -> None:
    with trio.fail_after(10):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.02)


async def config_of(zk: ZkClient, path: str) -> dict[str, str]:
    data, _ = await zk.get(path)
    value = json.loads(data)
    assert value["version"] == 1
    return dict(value["config"])


def test_quotas_in_kafkas_layout_followed_by_another_broker(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk_a, ZkClient.open(zk_connect) as zk_b:
            kafka_zk = KafkaZkClient(zk_a)
            await kafka_zk.create_top_level_paths()
            await kafka_zk.set_entity_config(USERS, "bob%40example.com", SCRAM)
            broker_a = await ZkClientQuotaStore.open(kafka_zk)
            broker_b = await ZkClientQuotaStore.open(KafkaZkClient(zk_b))
            assert broker_b.client_quotas() == {}  # a SCRAM credential is no quota
            seen = Seen()
            broker_b.subscribe(seen)
            follower = ZkConfigManager(zk_b, 2, lambda _entity, _configs: None)
            for entity_type in (USERS, CLIENTS, IPS):
                on_change = functools.partial(broker_b.on_config_changed, entity_type)
                follower.follow(entity_type, on_change)
            changes: dict[Entity, Mapping[str, float]] = {
                BOB: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
                PAIR: {"consumer_byte_rate": 2048.0},
                CLIENT_DEFAULT: {"controller_mutation_rate": 10.0},
                IP: {"connection_creation_rate": 5.0},
            }
            async with trio.open_nursery() as nursery:
                await nursery.start(follower.run)
                await broker_a.alter_client_quotas(
                    {entity: tuple(quotas.items()) for entity, quotas in changes.items()}
                )
                assert broker_a.client_quotas() == changes
                await until(lambda: seen.quotas == changes)
                assert broker_b.client_quotas() == changes

                bob = await config_of(zk_a, "/config/users/bob%40example.com")
                assert bob == {**SCRAM, "producer_byte_rate": "1024", "request_percentage": "50.0"}
                pair = await config_of(zk_a, "/config/users/bob%40example.com/clients/<default>")
                assert pair == {"consumer_byte_rate": "2048"}
                default = await config_of(zk_a, "/config/clients/<default>")
                assert default == {"controller_mutation_rate": "10.0"}
                assert await config_of(zk_a, "/config/ips/10.0.0.1") == {
                    "connection_creation_rate": "5"
                }
                names = sorted(await zk_a.children(zd.CONFIG_CHANGES))
                paths = [
                    json.loads((await zk_a.get(f"{zd.CONFIG_CHANGES}/{name}"))[0])["entity_path"]
                    for name in names[-4:]
                ]
                assert paths == [
                    "users/bob%40example.com",
                    "users/bob%40example.com/clients/<default>",
                    "clients/<default>",
                    "ips/10.0.0.1",
                ]

                # bob's request_percentage, set meanwhile by broker b, is kept by a's removal
                await broker_b.alter_client_quotas({BOB: (("request_percentage", 25.0),)})
                await broker_a.alter_client_quotas({BOB: (("producer_byte_rate", None),)})
                await until(lambda: seen.quotas[BOB] == {"request_percentage": 25.0})
                assert broker_a.client_quotas()[BOB] == {"request_percentage": 25.0}
                await broker_a.alter_client_quotas({BOB: (("request_percentage", None),)})
                await until(lambda: seen.quotas[BOB] == {})  # his quotas gone, his login stays
                assert BOB not in broker_b.client_quotas()
                assert await config_of(zk_a, "/config/users/bob%40example.com") == SCRAM
                nursery.cancel_scope.cancel()
            reopened = await ZkClientQuotaStore.open(KafkaZkClient(zk_b))
            assert reopened.client_quotas() == {k: v for k, v in changes.items() if k != BOB}

    trio.run(main)
