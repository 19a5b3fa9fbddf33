"""Group configs (`kafka-configs --entity-type groups`, ConfigResource GROUP): the share group
configs of Kafka 4.4's GroupConfig, their validation within the broker's `group.share.*`
bounds, and the settings a share group runs with.

A group config overrides its broker synonym (`share.record.lock.duration.ms` over
`group.share.record.lock.duration.ms`); a config without one (`share.auto.offset.reset`,
`share.isolation.level`) has Kafka's default. A value set before the broker's bounds were
narrowed is capped into them when used, as Kafka's GroupConfig.evaluate does. The overrides
are kept by a store: a single node's metadata file (as topic configs are), or in a ZooKeeper
cluster `/config/groups/<group>` (cluster/zk_group_config_store.py), which every broker
follows, so a group's configs apply on whichever broker coordinates it.
The dead-letter configs of KIP-1191 (`errors.deadletterqueue.topic.name`,
`errors.deadletterqueue.copy.record.enable`) name the group's dead-letter topic
(broker/share_dead_letters.py). Kafka's other group configs (consumer.*, streams.*) are
refused: a config kafkalite stored without applying would say it is in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kafkalite.config import TYPE_BOOLEAN, TYPE_INT, TYPE_STRING, BrokerConfig
from kafkalite.share import auto_offset_reset
from kafkalite.share.auto_offset_reset import AutoOffsetReset, InvalidStrategy

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
NOT_STORED = "This broker has no store for group configs"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"


class InvalidGroupConfig(ValueError):
    """A name or value Kafka refuses (INVALID_CONFIG, with Kafka's message)."""


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    config_type: int
    default: str  # Kafka's default (the broker synonym's, where there is one)
    broker_synonym: str | None = None
    least: int = 1  # Kafka's ConfigDef Range.atLeast
    bounds: tuple[str, str] | None = None  # the broker properties bounding it
    choices: tuple[str, ...] = ()
    doc: str = ""


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "share.auto.offset.reset",
            TYPE_STRING,
            "latest",
            doc="The strategy to initialize the share-partition start offset.",
        ),
        GroupConfigDef(
            "share.delivery.count.limit",
            TYPE_INT,
            "5",
            "group.share.delivery.count.limit",
            least=2,
            bounds=("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
            doc="The maximum number of delivery attempts for a record delivered to a share group.",
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            TYPE_INT,
            "5000",
            "group.share.heartbeat.interval.ms",
            bounds=(
                "group.share.min.heartbeat.interval.ms",
                "group.share.max.heartbeat.interval.ms",
            ),
            doc="The heartbeat interval given to the members of a share group.",
        ),
        GroupConfigDef(
            "share.isolation.level",
            TYPE_STRING,
            "read_uncommitted",
            choices=("read_committed", "read_uncommitted"),
            doc="Controls how to read records written transactionally.",
        ),
        GroupConfigDef(
            "share.partition.max.record.locks",
            TYPE_INT,
            "2000",
            "group.share.partition.max.record.locks",
            least=100,
            bounds=(
                "group.share.min.partition.max.record.locks",
                "group.share.max.partition.max.record.locks",
            ),
            doc="Share-group record lock limit per share-partition.",
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            TYPE_INT,
            "30000",
            "group.share.record.lock.duration.ms",
            least=1000,
            bounds=(
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
            doc="The record acquisition lock duration in milliseconds for share groups.",
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            TYPE_INT,
            "45000",
            "group.share.session.timeout.ms",
            bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
            doc="The timeout to detect client failures when using the share group protocol.",
        ),
        GroupConfigDef(
            DLQ_TOPIC_NAME,
            TYPE_STRING,
            "",
            doc="The name of the topic to be used as the dead-letter queue (DLQ) topic for this "
            "share group. If blank (the default), the group does not have a DLQ topic.",
        ),
        GroupConfigDef(
            DLQ_COPY_RECORD_ENABLE,
            TYPE_BOOLEAN,
            "false",
            doc="When writing onto the dead-letter queue topic, whether to copy the original "
            "record onto the DLQ topic, or just write a record containing the context "
            "information headers.",
        ),
    )
}

# Kafka 4.4's other group configs: known names, not served.
NOT_SERVED = frozenset(
    {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "consumer.assignment.interval.ms",
        "consumer.assignor.offload.enable",
        "share.renew.acknowledge.enable",
        "share.assignment.interval.ms",
        "share.assignor.offload.enable",
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms",
        "streams.assignment.interval.ms",
        "streams.rack.aware.assignment.tags",
        "streams.assignor.offload.enable",
        "streams.task.offset.interval.ms",
        "streams.num.warmup.replicas",
        "streams.acceptable.recovery.lag",
        "streams.assignor.name",
    }
)


def _int(definition: GroupConfigDef, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or not -(2**31) <= number < 2**31:
        raise InvalidGroupConfig(
            f"Invalid value {value} for configuration {definition.name}: Not a number of type INT"
        )
    if number < definition.least:
        raise InvalidGroupConfig(
            f"Invalid value {number} for configuration {definition.name}: Value must be at "
            f"least {definition.least}"
        )
    return number


def _parse(definition: GroupConfigDef, value: str) -> object:
    """ConfigDef.parse with the definition's validator (Kafka's messages)."""
    if definition.config_type == TYPE_INT:
        return _int(definition, value)
    if definition.config_type == TYPE_BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {definition.name}: Expected value to "
                "be either true or false"
            )
        return value.strip().lower()
    if definition.choices and value.strip() not in definition.choices:
        raise InvalidGroupConfig(
            f"Invalid value {value} for configuration {definition.name}: String must be one "
            f"of: {', '.join(definition.choices)}"
        )
    if definition.name == "share.auto.offset.reset":
        try:
            auto_offset_reset.parse(value)
        except InvalidStrategy as exc:
            raise InvalidGroupConfig(str(exc)) from None
    return value.strip()


def validate_group_configs(configs: Mapping[str, str], broker: BrokerConfig) -> dict[str, str]:
    """A group's overrides checked as Kafka's GroupConfig.validate does (names, values, the
    broker's bounds, a session longer than the heartbeat); returns them normalised."""
    for name in configs:
        if name in NOT_SERVED:
            raise InvalidGroupConfig(f"Group config {name} is not supported by kafkalite")
        if name not in GROUP_CONFIGS:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
    values = {name: _parse(GROUP_CONFIGS[name], value) for name, value in configs.items()}
    for name, value in values.items():
        bounds = GROUP_CONFIGS[name].bounds
        if bounds is not None:
            low, high = broker.int(bounds[0]), broker.int(bounds[1])
            if not low <= value <= high:  # type: ignore[operator]
                raise InvalidGroupConfig(f"{name} must be in the range {low} to {high} inclusive.")
    session, heartbeat = "share.session.timeout.ms", "share.heartbeat.interval.ms"
    if session in values or heartbeat in values:
        session_ms = values.get(session, broker.int(f"group.{session}"))
        heartbeat_ms = values.get(heartbeat, broker.int(f"group.{heartbeat}"))
        if session_ms <= heartbeat_ms:  # type: ignore[operator]
            raise InvalidGroupConfig(f"{session} must be greater than {heartbeat}")
    if str(values.get(DLQ_TOPIC_NAME, "")).startswith("__"):  # Kafka's internal topics
        raise InvalidGroupConfig(f"{DLQ_TOPIC_NAME}: DLQ topic name must not start with '__'")
    return {
        name: str(values[name]) if name == DLQ_COPY_RECORD_ENABLE else value.strip()
        for name, value in configs.items()
    }


def effective_value(broker: BrokerConfig, overrides: Mapping[str, str], name: str) -> str:
    """The value in force: the group's override, else the broker synonym, else Kafka's
    default."""
    definition = GROUP_CONFIGS[name]
    if name in overrides:
        return overrides[name]
    if definition.broker_synonym is not None:
        return str(broker.int(definition.broker_synonym))
    return definition.default


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """What a share group runs with."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: AutoOffsetReset
    isolation_level: int
    dlq_topic: str = ""  # none when blank
    dlq_copy_record: bool = False


def share_group_settings(broker: BrokerConfig, overrides: Mapping[str, str]) -> ShareGroupSettings:
    def number(name: str) -> int:
        value = int(effective_value(broker, overrides, name))
        bounds = GROUP_CONFIGS[name].bounds
        if name in overrides and bounds is not None:  # capped, as Kafka's evaluate
            value = min(max(value, broker.int(bounds[0])), broker.int(bounds[1]))
        return value

    return ShareGroupSettings(
        session_timeout_ms=number("share.session.timeout.ms"),
        heartbeat_interval_ms=number("share.heartbeat.interval.ms"),
        record_lock_duration_ms=number("share.record.lock.duration.ms"),
        delivery_count_limit=number("share.delivery.count.limit"),
        partition_max_record_locks=number("share.partition.max.record.locks"),
        auto_offset_reset=auto_offset_reset.parse(
            effective_value(broker, overrides, "share.auto.offset.reset")
        ),
        isolation_level=_ISOLATION_LEVELS[
            effective_value(broker, overrides, "share.isolation.level")
        ],
        dlq_topic=effective_value(broker, overrides, DLQ_TOPIC_NAME),
        dlq_copy_record=effective_value(broker, overrides, DLQ_COPY_RECORD_ENABLE) == "true",
    )


class GroupConfigStore(Protocol):
    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        """group id -> its overrides; a change replaces a group's mapping (a new object)."""
        ...

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace one group's overrides (none: it has none), durably."""
        ...


class SingleNodeGroupConfigs(Protocol):
    def group_configs(self) -> Mapping[str, Mapping[str, str]]: ...

    def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None: ...


@dataclass(frozen=True, slots=True)
class SingleNodeGroupConfigStore:
    """A single node's group configs: in its metadata file (broker/metadata_store.py)."""

    metadata: SingleNodeGroupConfigs

    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self.metadata.group_configs()

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        self.metadata.set_group_configs(group_id, configs)


@dataclass(eq=False)
class GroupConfigManager:
    """The groups' overrides and the settings they give (Kafka's GroupConfigManager)."""

    config: BrokerConfig
    store: GroupConfigStore | None
    # group id -> (the broker config and the overrides they were derived from, its settings):
    # asked for every share-partition of every share fetch. Overrides changed on another
    # broker come as a new mapping, so the cached settings are derived again.
    _settings: dict[str, tuple[BrokerConfig, Mapping[str, str] | None, ShareGroupSettings]] = field(
        default_factory=dict
    )

    def _stored(self, group_id: str) -> Mapping[str, str] | None:
        return None if self.store is None else self.store.group_configs().get(group_id)

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._stored(group_id) or {})

    def settings(self, group_id: str) -> ShareGroupSettings:
        stored = self._stored(group_id)
        cached = self._settings.get(group_id)
        if cached is not None and cached[0] is self.config and cached[1] is stored:
            return cached[2]
        settings = share_group_settings(self.config, stored or {})
        self._settings[group_id] = (self.config, stored, settings)
        return settings

    async def set(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Store validated overrides; the share group and its share-partitions use them
        from their next request (on every broker, in a cluster)."""
        if self.store is None:
            raise InvalidGroupConfig(NOT_STORED)
        await self.store.set_group_configs(group_id, configs)
        self._settings.pop(group_id, None)
