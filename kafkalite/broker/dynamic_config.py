"""Dynamic broker configs (`kafka-configs --entity-type brokers --alter`): per broker and the
cluster-wide default, persisted, applied without a restart, as Kafka's DynamicBrokerConfig.

Precedence, highest first, with the sources DescribeConfigs reports: this broker's dynamic value
(DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), the
static server.properties/--override value (STATIC_BROKER_CONFIG), Kafka's default
(DEFAULT_CONFIG). Only the properties Kafka updates dynamically cluster-wide can be set
(`DYNAMIC`): log retention, segments, message sizes, flushing, timestamps, the cleaner,
share groups' dead-letter topics (KIP-1191), the connection quotas (also per listener:
`listener.name.<listener>.max.connections`, `...max.connection.creation.rate`).

Where they are stored is the controller's business (broker/controller_api.py): a single node
keeps them in a file in the first log dir (`FileDynamicConfigStore`); a ZooKeeper cluster in
`/config/brokers/<id>` and `/config/brokers/<default>`, as Kafka's ZK mode does, each broker
applying the changes announced under `/config/changes`. `DynamicBrokerConfig` is this broker's
view: the stored configs read at start, then each change applied (`apply`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kafkalite.config import (
    PROPERTIES,
    TYPE_INT,
    TYPE_LONG,
    TYPE_SHORT,
    BrokerConfig,
    ConfigError,
    build_config,
    listener_property,
)
from kafkalite.storage.durable_files import write_atomically

log = logging.getLogger("kafkalite.broker")

DEFAULT_ENTITY = "<default>"
SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC, SOURCE_DEFAULT = 2, 3, 4, 5

# Kafka's dynamic broker configs (DynamicLogConfig, DynamicBrokerConfig: cluster-wide
# updatable) among the properties kafkalite has.
DYNAMIC = frozenset(
    {
        "errors.deadletterqueue.auto.create.topics.enable",
        "errors.deadletterqueue.topic.name.prefix",
        "log.cleaner.backoff.ms",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.message.timestamp.type",
        "log.retention.bytes",
        "log.retention.hours",
        "log.retention.minutes",
        "log.retention.ms",
        "log.roll.hours",
        "log.roll.ms",
        "log.segment.bytes",
        "max.connection.creation.rate",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "message.max.bytes",
        "min.insync.replicas",
        "unclean.leader.election.enable",
    }
)


# Kafka's per-listener configs updatable cluster-wide (listener.name.<listener>.<config>)
DYNAMIC_PER_LISTENER = frozenset({"max.connection.creation.rate", "max.connections"})

_NUMBER_TYPES = {TYPE_INT: "INT", TYPE_LONG: "LONG", TYPE_SHORT: "SHORT"}


class DynamicConfigStore(Protocol):
    def load(self) -> dict[str, dict[str, str]]:
        """Every entity's dynamic configs."""
        ...

    def save(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace one entity's dynamic configs (durably)."""
        ...


@dataclass
class FileDynamicConfigStore:
    path: Path

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read dynamic broker configs {self.path}: {exc}") from None
        return {str(entity): dict(configs) for entity, configs in data.items()}

    def save(self, entity: str, configs: Mapping[str, str]) -> None:
        data = self.load()
        data[entity] = dict(configs)
        data = {name: values for name, values in data.items() if values}
        write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True))


class DynamicConfigError(ValueError):
    """An update Kafka would refuse (its message)."""


@dataclass
class DynamicBrokerConfig:
    static: BrokerConfig
    entities: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def node_entity(self) -> str:
        return str(self.static.broker_id)

    def load(self, stored: Mapping[str, Mapping[str, str]]) -> BrokerConfig:
        """Take the stored configs of this broker and of the default; returns the effective
        config. Values that no longer parse are skipped with a warning, as Kafka skips
        invalid dynamic configs."""
        for entity in (DEFAULT_ENTITY, self.node_entity):
            self.apply(entity, stored.get(entity, {}))
        return self.effective()

    def apply(self, entity: str, configs: Mapping[str, str]) -> bool:
        """A stored change of `entity` (possibly made by another broker): False when it does
        not concern this broker, changes nothing, or is invalid here (then logged and
        skipped, as Kafka's DynamicBrokerConfig does)."""
        if entity not in (DEFAULT_ENTITY, self.node_entity):
            return False
        if self.entities.get(entity, {}) == dict(configs):
            return False
        try:
            self.validate(entity, configs)
        except DynamicConfigError as exc:
            log.warning("ignoring dynamic broker configs of %s: %s", entity, exc)
            return False
        self.entities[entity] = dict(configs)
        return True

    def configs(self, entity: str) -> dict[str, str]:
        return dict(self.entities.get(entity, {}))

    def effective(self) -> BrokerConfig:
        raw = {
            **self.static.raw,
            **self.entities.get(DEFAULT_ENTITY, {}),
            **self.entities.get(self.node_entity, {}),
        }
        return BrokerConfig(raw)

    def layers(self, name: str) -> list[tuple[str, int]]:
        """(value, source) of every layer that sets `name`, highest precedence first."""
        found = []
        for entity, source in (
            (self.node_entity, SOURCE_DYNAMIC_BROKER),
            (DEFAULT_ENTITY, SOURCE_DYNAMIC_DEFAULT),
        ):
            if name in self.entities.get(entity, {}):
                found.append((self.entities[entity][name], source))
        if name in self.static.raw:
            found.append((self.static.raw[name].strip(), SOURCE_STATIC))
        default = self.static.default(name) if name in PROPERTIES else None
        if default is not None:
            found.append((default, SOURCE_DEFAULT))
        return found

    def validate(self, entity: str, configs: Mapping[str, str]) -> None:
        self._check(configs)
        merged = dict(self.entities)
        merged[entity] = dict(configs)
        raw = {
            **self.static.raw,
            **merged.get(DEFAULT_ENTITY, {}),
            **merged.get(self.node_entity, {}),
        }
        try:
            config = build_config(raw)
        except ConfigError as exc:
            raise DynamicConfigError(str(exc)) from None
        _check_connection_limits(config)

    def _check(self, configs: Mapping[str, str]) -> None:
        unknown = sorted(name for name in configs if base_property(name) not in PROPERTIES)
        if unknown:
            raise DynamicConfigError(f"Unknown broker configs: {', '.join(unknown)}")
        fixed = sorted(name for name in configs if not is_dynamic(name))
        if fixed:
            raise DynamicConfigError(
                f"Cannot update these configs dynamically: [{', '.join(fixed)}]"
            )
        for name, value in configs.items():
            try:
                PROPERTIES[base_property(name)].parse(value)
            except (ValueError, ConfigError) as exc:
                raise DynamicConfigError(
                    f"Invalid value {value} for configuration {name}: {_reason(name, value, exc)}"
                ) from None


def _check_connection_limits(config: BrokerConfig) -> None:
    """Kafka's ListenerConnectionQuota.validateReconfiguration: each listener's limits (its
    own or the broker-wide ones) above 0, so no update can lock every client out."""
    for listener in config.listeners:
        for name in sorted(DYNAMIC_PER_LISTENER):
            value = config.listener_str(listener.name, name)
            if value is not None and int(value) <= 0:
                raise DynamicConfigError(f"Invalid {name} {int(value)}")


def base_property(name: str) -> str:
    """The property a (possibly listener-prefixed) config name sets."""
    scoped = listener_property(name)
    return scoped[1] if scoped else name


def is_dynamic(name: str) -> bool:
    """Whether kafka-configs may set `name` on a broker or the cluster default."""
    scoped = listener_property(name)
    return scoped[1] in DYNAMIC_PER_LISTENER if scoped else name in DYNAMIC


def _reason(name: str, value: str, exc: Exception) -> str:
    """Kafka's ConfigDef wording for a value that is not a number of the property's type."""
    kind = _NUMBER_TYPES.get(PROPERTIES[base_property(name)].config_type)
    if kind is not None:
        try:
            int(value.strip())
        except ValueError:
            return f"Not a number of type {kind}"
    return str(exc)
