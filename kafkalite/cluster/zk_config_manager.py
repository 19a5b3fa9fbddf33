"""Dynamic broker configs in ZooKeeper, as Kafka's ZK-era brokers keep and follow them.

Layout (Kafka's AdminZkClient.changeBrokerConfig): an entity's configs in
`/config/brokers/<id>` or `/config/brokers/<default>` as `{"version":1,"config":{...}}`, and
every change announced by a sequential `/config/changes/config_change_<seq>` holding
`{"version":2,"entity_path":"brokers/<entity>"}` (kafka_zk.set_entity_config writes both).

`ZkConfigManager` follows them as Kafka's ZkConfigManager with its
ZkNodeChangeNotificationListener does: at start the stored configs of this broker and of the
default are read; then each notification newer than the last one processed (all of them
after a start or a lost watch) re-reads the entity's znode, so a broker always ends at the
znode's latest content whatever order the notifications are seen in, and hands changes that
concern this broker (its id or `<default>`) to `on_change`, in the trio task that runs it.
Other entity types are handed to the handlers `follow` registered for them (SCRAM credentials
under `users`, cluster/zk_scram_store.py; client quotas under `users`, `clients` and `ips`,
cluster/zk_quota_store.py; group configs under `groups`, cluster/zk_group_config_store.py),
for every entity of the type.
Notifications older than 15 minutes are deleted (Kafka's changeExpirationMs), by whichever
broker sees them first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from kafkalite.broker.dynamic_config import DEFAULT_ENTITY
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient, now_ms
from kafkalite.cluster.zk_client import ConnectionLost, NoNode, SessionExpired, ZkClient, ZkWatch
from kafkalite.cluster.zk_metadata import wait_any

log = logging.getLogger(__name__)
BROKERS = "brokers"  # Kafka's ConfigType.BROKER
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
OnChange = Callable[[str, dict[str, str]], None]  # (entity, its configs)


def change_number(name: str) -> int:
    """The sequence number of `config_change_<seq>` (-1 for a node that is not one)."""
    digits = name.removeprefix(zd.CONFIG_CHANGE_PREFIX)
    return int(digits) if name.startswith(zd.CONFIG_CHANGE_PREFIX) and digits.isdigit() else -1


class ZkConfigManager:
    def __init__(self, zk: ZkClient, broker_id: int, on_change: OnChange) -> None:
        self.zk = zk
        self.kafka_zk = KafkaZkClient(zk)
        self.entities = (DEFAULT_ENTITY, str(broker_id))  # the broker entities followed here
        self.on_change = on_change
        self.handlers: dict[str, list[OnChange]] = {}  # other entity types -> their handlers
        self.last_executed_change = -1

    def follow(self, entity_type: str, on_change: OnChange) -> None:
        """Hand every change of an entity of `entity_type` to `on_change` too (before
        `run`): a user's SCRAM credentials and its quotas share `/config/users/<user>`."""
        self.handlers.setdefault(entity_type, []).append(on_change)

    async def read_broker_configs(self) -> dict[str, dict[str, str]]:
        """The stored configs of this broker and of the default (Kafka reads them at start)."""
        return {e: await self.kafka_zk.entity_config(BROKERS, e) for e in self.entities}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow `/config/changes` until cancelled."""
        task_status.started()
        while True:
            try:
                watches = await self.process_notifications()
            except (ConnectionLost, SessionExpired):
                await self.zk.wait_connected()
                continue
            await wait_any(watches)

    async def process_notifications(self) -> list[ZkWatch]:
        """One pass: the notifications not processed yet, then the purge; the watch for the
        next notification."""
        try:
            names, watch = await self.zk.children_watch(zd.CONFIG_CHANGES)
        except NoNode:  # deleted under us: created again, as Kafka's brokers do at start
            await self.zk.ensure_path(zd.CONFIG_CHANGES)
            names, watch = await self.zk.children_watch(zd.CONFIG_CHANGES)
        notifications = sorted((n for n in names if change_number(n) >= 0), key=change_number)
        for name in notifications:
            if change_number(name) > self.last_executed_change:
                await self._process(name)
                self.last_executed_change = change_number(name)
        await self._purge_obsolete(notifications)
        return [watch]

    async def _process(self, name: str) -> None:
        path = f"{zd.CONFIG_CHANGES}/{name}"
        try:
            data, _ = await self.zk.get(path)
            entity_type, entity = zd.decode_config_change(data)
            handlers = self._handlers(entity_type, entity)
            if not handlers:
                return  # topics are followed by ZkMetadata; other brokers' overrides are theirs
            configs = await self.kafka_zk.entity_config(entity_type, entity)
        except NoNode:
            return  # purged meanwhile: older than any change still to apply
        except zd.ZkDataError as exc:
            log.error("ignoring config change notification %s: %s", path, exc)
            return
        if entity_type == BROKERS:
            log.info("dynamic broker configs of %s changed (%s): %s", entity, name, configs)
        for on_change in handlers:
            on_change(entity, configs)

    def _handlers(self, entity_type: str, entity: str) -> list[OnChange]:
        if entity_type == BROKERS:
            return [self.on_change] if entity in self.entities else []
        return self.handlers.get(entity_type, [])

    async def _purge_obsolete(self, notifications: list[str]) -> None:
        now = now_ms()
        for name in notifications:
            path = f"{zd.CONFIG_CHANGES}/{name}"
            try:
                _, stat = await self.zk.get(path)
                if now - stat.ctime_ms > CHANGE_EXPIRATION_MS:
                    await self.zk.delete(path)
            except NoNode:
                continue  # purged by another broker
