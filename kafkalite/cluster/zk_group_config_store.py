"""Group configs in ZooKeeper (`kafka-configs --entity-type groups`, broker/group_configs.py),
kept in Kafka's config layout so that a group config set on one broker applies to the group
on whichever broker coordinates it.

`/config/groups/<sanitized group>` holds `{"version":1,"config":{"share.auto.offset.reset":
"earliest",...}}` (Kafka's ConfigType.GROUP, "groups"; group ids sanitized as Kafka's Sanitizer
does, a group id being any string); each change is announced by
`/config/changes/config_change_<seq>` holding `{"version":2,"entity_path":"groups/<group>"}`.
Every broker reads all groups' configs at start and follows the notifications through its
ZkConfigManager (cluster/zk_config_manager.py), which hands each `groups` change to
`on_group_config_changed`. A group's overrides are replaced, never changed in place: the
GroupConfigManager's cached settings are keyed by them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_data import GROUPS
from kafkalite.cluster.zk_scram_store import desanitize, sanitize


class ZkGroupConfigStore:
    def __init__(self, kafka_zk: KafkaZkClient, configs: dict[str, dict[str, str]]) -> None:
        self.kafka_zk = kafka_zk
        self._configs = configs

    @classmethod
    async def open(cls, kafka_zk: KafkaZkClient) -> ZkGroupConfigStore:
        """Read every group's configs (as Kafka's brokers read each entity type at start)."""
        entities = await kafka_zk.entity_configs(GROUPS)
        configs = {desanitize(entity): found for entity, found in entities.items() if found}
        return cls(kafka_zk, configs)

    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._configs

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs in ZooKeeper (none: an empty config, as kafka-configs
        leaves an entity whose configs were all deleted) and announce the change."""
        await self.kafka_zk.set_entity_config(GROUPS, sanitize(group_id), dict(configs))
        self.on_group_config_changed(sanitize(group_id), configs)  # here at once

    def on_group_config_changed(self, entity: str, configs: Mapping[str, str]) -> None:
        """A group's configs as now stored (another broker's change, or this one's)."""
        group_id = desanitize(entity)
        if configs:
            self._configs[group_id] = dict(configs)
        else:
            self._configs.pop(group_id, None)
