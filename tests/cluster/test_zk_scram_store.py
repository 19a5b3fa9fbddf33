"""SCRAM credentials in ZooKeeper (kafkalite.cluster.zk_scram_store) against a real ZooKeeper:
Kafka's layout (`/config/users/<sanitized user>`, the `/config/changes` notification), the
user's quota keys left as they are, and another broker following through its
ZkConfigManager."""

from __future__ import annotations

import json

import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zk_config_manager import ZkConfigManager
from kafkalite.cluster.zk_scram_store import USERS, ZkScramCredentialStore, sanitize
from kafkalite.security.scram_credential import SCRAM_SHA_256, ScramCredential

USER = "bob@example.com"  # sanitized as Kafka's Sanitizer does: bob%40example.com
QUOTAS = {"producer_byte_rate": "1024"}  # written by kafka-configs beside the credentials


def credential(iterations: int) -> str:
    return ScramCredential.from_password(SCRAM_SHA_256, "pw", b"salt", iterations).to_string()


async def until(condition: object) -> None:
    with trio.fail_after(10):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.02)


def test_credentials_in_kafkas_layout_followed_by_another_broker(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk_a, ZkClient.open(zk_connect) as zk_b:
            kafka_zk = KafkaZkClient(zk_a)
            await kafka_zk.create_top_level_paths()
            await kafka_zk.set_entity_config(USERS, sanitize(USER), QUOTAS)
            broker_a = await ZkScramCredentialStore.open(kafka_zk)
            broker_b = await ZkScramCredentialStore.open(KafkaZkClient(zk_b))
            assert broker_b.scram_credentials() == {}  # quotas only: no SCRAM user
            follower = ZkConfigManager(zk_b, 2, lambda _entity, _configs: None)
            follower.follow(USERS, broker_b.on_user_config_changed)
            async with trio.open_nursery() as nursery:
                await nursery.start(follower.run)
                first = {"SCRAM-SHA-256": credential(4096)}
                await broker_a.set_scram_credentials({USER: first})
                assert broker_a.scram_credentials() == {USER: first}
                await until(lambda: broker_b.scram_credentials() == {USER: first})

                data, _ = await zk_a.get("/config/users/bob%40example.com")
                assert json.loads(data) == {"version": 1, "config": {**QUOTAS, **first}}
                changes = sorted(await zk_a.children(zd.CONFIG_CHANGES))
                latest, _ = await zk_a.get(f"{zd.CONFIG_CHANGES}/{changes[-1]}")
                assert json.loads(latest) == {
                    "version": 2,
                    "entity_path": "users/bob%40example.com",
                }

                await broker_a.set_scram_credentials({USER: {}})  # the user goes
                await until(lambda: broker_b.scram_credentials() == {})
                data, _ = await zk_a.get("/config/users/bob%40example.com")
                assert json.loads(data)["config"] == QUOTAS  # its quotas stay
                nursery.cancel_scope.cancel()
            reopened = await ZkScramCredentialStore.open(KafkaZkClient(zk_b))
            assert reopened.scram_credentials() == {}

    trio.run(main)
