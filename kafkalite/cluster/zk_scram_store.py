"""SCRAM credentials in ZooKeeper, as ZooKeeper-era Kafka keeps them (AdminZkClient's user
configs), so that a user created on one broker logs in on every broker.

`/config/users/<sanitized user>` holds `{"version":1,"config":{"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=4096"}}` beside the user's quotas
(`producer_byte_rate`...), which a credential change leaves as they are; each change is
announced by `/config/changes/config_change_<seq>` holding
`{"version":2,"entity_path":"users/<sanitized user>"}`. Every broker reads all users' credentials
at start and follows the notifications through its ZkConfigManager
(cluster/zk_config_manager.py), which hands each `users` change to `on_user_config_changed`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import quote, unquote

from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.security.scram_credential import MECHANISMS, ScramCredential

log = logging.getLogger(__name__)
USERS = "users"  # Kafka's ConfigType.USER


def sanitize(user: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encoded, `*` and space as %2A and %20."""
    return quote(user, safe="._-")


def desanitize(entity: str) -> str:
    return unquote(entity)


def scram_of(configs: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM credentials among a user's configs (its quotas are not)."""
    credentials = {}
    for name, text in configs.items():
        if name not in MECHANISMS:
            continue
        try:
            ScramCredential.from_string(text)
        except ValueError as exc:  # written by hand: the user cannot log in with it
            log.error("ignoring the %s credential of a user: %s", name, exc)
            continue
        credentials[name] = text
    return credentials


class ZkScramCredentialStore:
    def __init__(self, kafka_zk: KafkaZkClient, credentials: dict[str, dict[str, str]]) -> None:
        self.kafka_zk = kafka_zk
        self._credentials = credentials

    @classmethod
    async def open(cls, kafka_zk: KafkaZkClient) -> ZkScramCredentialStore:
        """Read every user's credentials (Kafka's CredentialProvider at start)."""
        credentials = {}
        for entity, configs in (await kafka_zk.entity_configs(USERS)).items():
            if found := scram_of(configs):
                credentials[desanitize(entity)] = found
        return cls(kafka_zk, credentials)

    def scram_credentials(self) -> Mapping[str, Mapping[str, str]]:
        return self._credentials

    async def set_scram_credentials(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        for user, credentials in changes.items():

            def replaced(
                configs: dict[str, str], new: Mapping[str, str] = credentials
            ) -> dict[str, str]:
                kept = {name: value for name, value in configs.items() if name not in MECHANISMS}
                return {**kept, **new}

            configs = await self.kafka_zk.update_entity_config(USERS, sanitize(user), replaced)
            self.on_user_config_changed(sanitize(user), configs)  # here at once

    def on_user_config_changed(self, entity: str, configs: Mapping[str, str]) -> None:
        """A user's configs as now stored (another broker's change, or this one's)."""
        if "/" in entity:
            return  # `<user>/clients/<client id>`: a quota entity's (cluster/zk_quota_store.py)
        user = desanitize(entity)
        if credentials := scram_of(configs):
            self._credentials[user] = credentials
        else:
            self._credentials.pop(user, None)
