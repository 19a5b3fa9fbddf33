"""Client quotas in ZooKeeper, as ZooKeeper-era Kafka keeps them (AdminZkClient.changeConfigs,
ZkAdminManager.alterClientQuotas), so that a quota set on one broker is enforced by every
broker.

Each entity is a config znode `{"version":1,"config":{"producer_byte_rate":"1024",...}}`:
`/config/users/<user>`, `/config/clients/<client id>`, `/config/users/<user>/clients/<client
id>` for the pair and `/config/ips/<ip>`; names sanitized as Kafka's Sanitizer does, a
default named `<default>`. A user's quotas share its znode with its SCRAM credentials
(cluster/zk_scram_store.py): each store rewrites only its own keys. Every change is announced
by `/config/changes/config_change_<seq>` (entity path `users/<user>/clients/<client>` for a
pair); every broker reads all quotas at start and follows the notifications through its
ZkConfigManager, handing each entity's quotas to its listeners (the quota managers).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kafkalite.broker.client_quotas import (
    CLIENT_ID,
    IP,
    IP_KEYS,
    USER,
    USER_AND_CLIENT_KEYS,
    Entity,
    Ops,
    QuotaListener,
    applied,
    entity_of,
)
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import NoNode
from kafkalite.cluster.zk_data import DEFAULT_ENTITY
from kafkalite.cluster.zk_scram_store import USERS, desanitize, sanitize

log = logging.getLogger(__name__)
CLIENTS, IPS = "clients", "ips"  # Kafka's ConfigType.CLIENT and ConfigType.IP
CLIENTS_OF_USER = "/clients/"  # `<user>/clients/<client id>`: the pair's entity name
QUOTA_KEYS = {**USER_AND_CLIENT_KEYS, **IP_KEYS}


def _name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _parsed(name: str) -> str | None:
    return None if name == DEFAULT_ENTITY else desanitize(name)


def znode_of(entity: Entity) -> tuple[str, str]:
    """The config entity type and name that keep `entity`'s quotas."""
    names = dict(entity)
    if IP in names:
        ip = names[IP]
        return IPS, DEFAULT_ENTITY if ip is None else ip
    if USER in names and CLIENT_ID in names:
        return USERS, _name(names[USER]) + CLIENTS_OF_USER + _name(names[CLIENT_ID])
    if USER in names:
        return USERS, _name(names[USER])
    return CLIENTS, _name(names[CLIENT_ID])


def entity_at(entity_type: str, name: str) -> Entity | None:
    """The quota entity a config znode keeps (None: not a quota entity's znode)."""
    if entity_type == IPS:
        return entity_of([(IP, None if name == DEFAULT_ENTITY else name)])
    if entity_type == CLIENTS and "/" not in name:
        return entity_of([(CLIENT_ID, _parsed(name))])
    if entity_type != USERS:
        return None
    user, pair, client = name.partition(CLIENTS_OF_USER)
    if "/" in user or "/" in client:
        return None
    if pair:
        return entity_of([(USER, _parsed(user)), (CLIENT_ID, _parsed(client))])
    return entity_of([(USER, _parsed(user))])


def quotas_of(configs: Mapping[str, str]) -> dict[str, float]:
    """The quotas among an entity's configs (SCRAM credentials are not)."""
    quotas = {}
    for key, text in configs.items():
        if key not in QUOTA_KEYS:
            continue
        try:
            quotas[key] = float(text)
        except ValueError:  # written by hand: not enforced
            log.error("ignoring quota %s=%r: not a number", key, text)
    return quotas


def quota_text(key: str, value: float) -> str:
    """As ZkAdminManager writes it: LONG and INT as integers, DOUBLE as Double.toString."""
    return str(round(value)) if QUOTA_KEYS[key] in ("LONG", "INT") else repr(float(value))


class ZkClientQuotaStore:
    def __init__(self, kafka_zk: KafkaZkClient, quotas: dict[Entity, dict[str, float]]) -> None:
        self.kafka_zk = kafka_zk
        self._quotas = quotas
        self._listeners: list[QuotaListener] = []

    @classmethod
    async def open(cls, kafka_zk: KafkaZkClient) -> ZkClientQuotaStore:
        """Read every entity's quotas (Kafka's ConfigHandlers at start)."""
        quotas: dict[Entity, dict[str, float]] = {}
        for entity_type, name in await cls._quota_znodes(kafka_zk):
            entity = entity_at(entity_type, name)
            found = quotas_of(await kafka_zk.entity_config(entity_type, name))
            if entity is not None and found:
                quotas[entity] = found
        return cls(kafka_zk, quotas)

    @staticmethod
    async def _quota_znodes(kafka_zk: KafkaZkClient) -> list[tuple[str, str]]:
        znodes = []
        for entity_type in (USERS, CLIENTS, IPS):
            for name in await _children(kafka_zk, f"/config/{entity_type}"):
                znodes.append((entity_type, name))
                if entity_type == USERS:
                    clients = await _children(kafka_zk, f"/config/{USERS}/{name}/{CLIENTS}")
                    znodes += [(USERS, name + CLIENTS_OF_USER + c) for c in clients]
        return znodes

    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        return self._quotas

    def subscribe(self, listener: QuotaListener) -> None:
        self._listeners.append(listener)

    async def alter_client_quotas(self, changes: Mapping[Entity, Ops]) -> None:
        """Each entity's ops on its znode as read (another broker's change to it kept, as
        ZkAdminManager.alterClientQuotas applies them to fetchEntityConfig), conditionally."""
        for entity, ops in changes.items():

            def replaced(configs: dict[str, str], ops: Ops = ops) -> dict[str, str]:
                kept = {key: value for key, value in configs.items() if key not in QUOTA_KEYS}
                quotas = applied(quotas_of(configs), ops)
                return {**kept, **{key: quota_text(key, value) for key, value in quotas.items()}}

            entity_type, name = znode_of(entity)
            configs = await self.kafka_zk.update_entity_config(entity_type, name, replaced)
            self.on_config_changed(entity_type, name, configs)  # here at once

    def on_config_changed(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """An entity's configs as now stored (another broker's change, or this one's)."""
        entity = entity_at(entity_type, name)
        if entity is None:
            return
        quotas = quotas_of(configs)
        if quotas:
            self._quotas[entity] = quotas
        elif self._quotas.pop(entity, None) is None:
            return  # had none, has none (a SCRAM credential changed)
        for listener in self._listeners:
            listener.on_client_quota_changed(entity, quotas)


async def _children(kafka_zk: KafkaZkClient, path: str) -> list[str]:
    try:
        return await kafka_zk.zk.children(path)
    except NoNode:
        return []
