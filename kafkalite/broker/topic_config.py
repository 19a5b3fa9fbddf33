"""Topic-level configs: names, types, broker synonyms and how they become a LogConfig.

A topic config overrides its broker synonym (`retention.ms` over `log.retention.ms`), which
overrides Kafka's default; DescribeConfigs reports that chain as synonyms with sources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkalite.config import (
    DEFAULT_RETENTION_MS,
    HOUR_MS,
    I32_MAX,
    LONG_MAX,
    TYPE_BOOLEAN,
    TYPE_DOUBLE,
    TYPE_INT,
    TYPE_LIST,
    TYPE_LONG,
    TYPE_STRING,
    BrokerConfig,
)
from kafkalite.storage.log import LogConfig

# DescribeConfigs sources.
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class InvalidConfig(ValueError):
    """A topic config name or value Kafka would reject (INVALID_CONFIG)."""


I32_MIN, LONG_MIN = -(2**31), -(2**63)


def _number(kind: str, smallest: int, largest: int) -> Callable[..., Callable[[str], int]]:
    """Kafka's INT/LONG parsing with its Range validator's wording (ConfigDef.Range)."""

    def bounded(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
        def parse(value: str) -> int:
            try:
                number = int(value.strip())
            except ValueError:
                number = smallest - 1
            if not smallest <= number <= largest:
                raise InvalidConfig(f"Not a number of type {kind}")
            if low is not None and number < low:
                raise InvalidConfig(f"Value must be at least {low}")
            if high is not None and number > high:
                raise InvalidConfig(f"Value must be no more than {high}")
            return number

        return parse

    return bounded


_long = _number("LONG", LONG_MIN, LONG_MAX)
_int = _number("INT", I32_MIN, I32_MAX)


def _gzip_level(value: str) -> int:
    level = _int()(value)
    if level != -1 and not 1 <= level <= 9:  # Kafka's GzipCompression.LevelValidator
        raise InvalidConfig("Value must be between 1 and 9 or equal to -1")
    return level


def _bool(value: str) -> str:
    if value.strip().lower() not in ("true", "false"):
        raise InvalidConfig("Expected value to be either true or false")
    return value.strip().lower()


def _enabled(value: str) -> bool:
    return _bool(value) == "true"


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value.strip() not in choices:
            raise InvalidConfig(f"String must be one of: {', '.join(choices)}")
        return value.strip()

    return parse


def _cleanup_policy(value: str) -> str:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    # Empty (Kafka 4.1+, KIP-1161): neither deleted nor compacted, records are kept forever.
    if any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfig("String must be one of: compact, delete")  # Kafka's ValidList
    return ",".join(parts)


def _header_names(value: str) -> str:
    """kafkalite.index.headers: header names, comma-separated (empty: none)."""
    names = [name.strip() for name in value.split(",")]
    if value.strip() and not all(names):
        raise InvalidConfig("Header names must be non-empty, separated by commas")
    return ",".join(name for name in names if name)


def _ratio(value: str) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        raise InvalidConfig("Not a number of type DOUBLE") from None
    if number < 0.0:
        raise InvalidConfig("Value must be at least 0")
    if number > 1.0:
        raise InvalidConfig("Value must be no more than 1")
    return number


def _any(value: str) -> str:
    return value.strip()


def _backoffs(value: str) -> str:
    """Comma-separated milliseconds, at least one (kafkalite.retry.backoff.ms)."""
    parts = [part.strip() for part in value.split(",")]
    if not all(part.isdigit() for part in parts):
        raise InvalidConfig("Expected a comma-separated list of milliseconds")
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    parse: Callable[[str], object]
    config_type: int
    default: str
    broker_synonym: str | None  # the broker property that supplies the default
    log_field: str | None  # LogConfig field it sets


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy", _cleanup_policy, TYPE_LIST, "delete", None, "cleanup_policy"
        ),
        TopicConfigDef(
            "compression.type",
            _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            TYPE_STRING,
            "producer",
            None,
            "compression_type",
        ),
        TopicConfigDef(
            "retention.ms",
            _long(-1),
            TYPE_LONG,
            str(DEFAULT_RETENTION_MS),
            "log.retention.ms",
            "retention_ms",
        ),
        TopicConfigDef(
            "retention.bytes",
            _long(),  # any negative value: no size limit, as in Kafka
            TYPE_LONG,
            "-1",
            "log.retention.bytes",
            "retention_bytes",
        ),
        TopicConfigDef(
            "segment.bytes",
            _int(14),  # Kafka 4: at least 1 MiB (FINDINGS.md: deliberate)
            TYPE_INT,
            str(1024**3),
            "log.segment.bytes",
            "segment_bytes",
        ),
        TopicConfigDef(
            "segment.ms", _long(1), TYPE_LONG, str(168 * HOUR_MS), "log.roll.ms", "segment_ms"
        ),
        TopicConfigDef(
            "max.message.bytes",
            _int(0),
            TYPE_INT,
            "1048588",
            "message.max.bytes",
            "max_message_bytes",
        ),
        TopicConfigDef(
            "message.timestamp.type",
            _choice("CreateTime", "LogAppendTime"),
            TYPE_STRING,
            "CreateTime",
            "log.message.timestamp.type",
            "message_timestamp_type",
        ),
        TopicConfigDef(
            "index.interval.bytes",
            _int(0),
            TYPE_INT,
            "4096",
            "log.index.interval.bytes",
            "index_interval_bytes",
        ),
        TopicConfigDef(
            "flush.messages",
            _long(1),
            TYPE_LONG,
            str(LONG_MAX),
            "log.flush.interval.messages",
            "flush_messages",
        ),
        TopicConfigDef(
            "flush.ms", _long(0), TYPE_LONG, str(LONG_MAX), "log.flush.interval.ms", "flush_ms"
        ),
        TopicConfigDef("min.insync.replicas", _int(1), TYPE_INT, "1", "min.insync.replicas", None),
        TopicConfigDef(
            "segment.index.bytes",
            _int(4),
            TYPE_INT,
            str(10 * 1024**2),
            "log.index.size.max.bytes",
            "segment_index_bytes",
        ),
        TopicConfigDef(
            "unclean.leader.election.enable",
            _bool,
            TYPE_BOOLEAN,
            "false",
            None,
            None,
        ),
        # KIP-1191: the topic may be a share group's dead-letter topic.
        TopicConfigDef(
            "errors.deadletterqueue.group.enable", _bool, TYPE_BOOLEAN, "false", None, None
        ),
        TopicConfigDef(
            "delete.retention.ms", _long(0), TYPE_LONG, "86400000", None, "delete_retention_ms"
        ),
        TopicConfigDef(
            "min.compaction.lag.ms", _long(0), TYPE_LONG, "0", None, "min_compaction_lag_ms"
        ),
        TopicConfigDef("max.compaction.lag.ms", _long(1), TYPE_LONG, str(LONG_MAX), None, None),
        TopicConfigDef(
            "min.cleanable.dirty.ratio",
            _ratio,
            TYPE_DOUBLE,
            "0.5",
            None,
            "min_cleanable_dirty_ratio",
        ),
        TopicConfigDef("file.delete.delay.ms", _long(0), TYPE_LONG, "60000", None, None),
        TopicConfigDef("preallocate", _bool, TYPE_BOOLEAN, "false", None, None),
        TopicConfigDef(
            "message.timestamp.before.max.ms",
            _long(0),
            TYPE_LONG,
            str(LONG_MAX),
            None,
            "message_timestamp_before_max_ms",
        ),
        # Kafka 4: a CreateTime more than an hour ahead of the broker's clock is rejected.
        TopicConfigDef(
            "message.timestamp.after.max.ms",
            _long(0),
            TYPE_LONG,
            "3600000",
            None,
            "message_timestamp_after_max_ms",
        ),
        # Accepted and described like Kafka's, but the levels (KIP-390) do not change what
        # the broker writes: recompressing for compression.type uses the codec libraries'
        # default levels.
        TopicConfigDef("compression.gzip.level", _gzip_level, TYPE_INT, "-1", None, None),
        TopicConfigDef("compression.lz4.level", _int(1, 17), TYPE_INT, "9", None, None),
        TopicConfigDef("compression.zstd.level", _int(-131072, 22), TYPE_INT, "3", None, None),
        TopicConfigDef("segment.jitter.ms", _long(0), TYPE_LONG, "0", None, None),
        # Headers whose values each segment indexes per batch, for views (issue 18).
        TopicConfigDef(
            "kafkalite.index.headers", _header_names, TYPE_LIST, "", None, "index_headers"
        ),
        TopicConfigDef(
            "max.decompressed.message.bytes",
            _int(1, I32_MAX - 8),
            TYPE_INT,
            str(I32_MAX - 8),
            None,
            None,
        ),
        # Tiered storage (KIP-405): retention.ms/bytes bound the whole log, local and
        # remote; local.retention.* only the local part (-2: the same as retention.*).
        TopicConfigDef(
            "remote.storage.enable", _enabled, TYPE_BOOLEAN, "false", None, "remote_storage_enable"
        ),
        TopicConfigDef(
            "local.retention.ms", _long(-2), TYPE_LONG, "-2", None, "local_retention_ms"
        ),
        TopicConfigDef(
            "local.retention.bytes", _long(-2), TYPE_LONG, "-2", None, "local_retention_bytes"
        ),
        # Kafka 3.9 (KIP-950): read-only remote data, and turning remote storage off.
        TopicConfigDef(
            "remote.log.copy.disable",
            _enabled,
            TYPE_BOOLEAN,
            "false",
            None,
            "remote_log_copy_disable",
        ),
        TopicConfigDef(
            "remote.log.delete.on.disable",
            _enabled,
            TYPE_BOOLEAN,
            "false",
            None,
            "remote_log_delete_on_disable",
        ),
        # Delayed delivery (broker/delayed_delivery.py); kafkalite's own, not Kafka's.
        TopicConfigDef(
            "kafkalite.delayed.delivery.enable",
            _bool,
            TYPE_BOOLEAN,
            "false",
            "kafkalite.delayed.delivery.enable",
            None,
        ),
        TopicConfigDef("kafkalite.delivery.delay.ms", _long(0), TYPE_LONG, "0", None, None),
        # Retry topics (broker/retry_topics.py): kafkalite's own.
        TopicConfigDef("kafkalite.retry.target", _any, TYPE_STRING, "", None, None),
        TopicConfigDef("kafkalite.retry.backoff.ms", _backoffs, TYPE_LIST, "1000", None, None),
        TopicConfigDef("kafkalite.retry.max.attempts", _int(0), TYPE_INT, "3", None, None),
        TopicConfigDef("kafkalite.retry.dead.letter.topic", _any, TYPE_STRING, "", None, None),
        TopicConfigDef(
            "kafkalite.delayed.delivery.max.ms",
            _long(0),
            TYPE_LONG,
            str(7 * 24 * HOUR_MS),
            "kafkalite.delayed.delivery.max.ms",
            None,
        ),
    )
}


def validate_topic_configs(
    configs: Mapping[str, str | None], broker: BrokerConfig | None = None
) -> dict[str, str]:
    """Check names and values (and, given the broker's config, that remote storage can be
    enabled); returns the normalised overrides. Raises InvalidConfig."""
    normalised: dict[str, str] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic config {name}")
        try:
            definition.parse(value)
        except InvalidConfig as exc:
            raise InvalidConfig(f"Invalid value {value} for configuration {name}: {exc}") from None
        normalised[name] = value.strip()
    if broker is not None:
        check_remote_storage(broker, normalised)
    return normalised


# Broker properties that stand for one setting, highest precedence first (Kafka's synonyms).
_SYNONYM_CHAINS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
}


def check_remote_storage(broker: BrokerConfig, configs: Mapping[str, str]) -> None:
    """Kafka's checks of remote.storage.enable: the broker must have tiered storage on, and a
    compacted topic cannot be tiered. Raises InvalidConfig."""
    if configs.get("remote.storage.enable", "false").strip().lower() != "true":
        return
    if not broker.bool("remote.log.storage.system.enable"):
        raise InvalidConfig(
            "You have to enable remote.log.storage.system.enable to set remote.storage.enable"
            " to true at the topic level"
        )
    if "compact" in configs.get("cleanup.policy", "delete"):
        raise InvalidConfig(
            "Remote log storage only supports topics with cleanup.policy=delete or cleanup"
            ".policy being an empty list"
        )
    for kind in ("ms", "bytes"):  # Kafka's LogConfig.validateLocalRetention*
        total = int(effective_value(broker, configs, f"retention.{kind}")[0])
        name = f"local.retention.{kind}"
        local = int(effective_value(broker, configs, name)[0])
        if total < 0 or local == -2:
            continue
        if local == -1:
            raise InvalidConfig(
                f"Invalid value -1 for configuration {name}: Value must not be -1 as"
                f" retention.{kind} value is set as {total}."
            )
        if local > total:
            raise InvalidConfig(
                f"Invalid value {local} for configuration {name}: Value must not be more than"
                f" retention.{kind} property value: {total}"
            )
    if _is_true(configs, "remote.log.copy.disable"):
        for kind in ("bytes", "ms"):  # Kafka's validateRetentionConfigsWhenRemoteCopyDisabled
            total = int(effective_value(broker, configs, f"retention.{kind}")[0])
            local = int(effective_value(broker, configs, f"local.retention.{kind}")[0])
            if local not in (-2, total):
                raise InvalidConfig(
                    f"When `remote.log.copy.disable` is set to true, the `local.retention.{kind}`"
                    f" and `retention.{kind}` must be set to the identical value because there"
                    " will be no more logs copied to the remote storage."
                )


def _is_true(configs: Mapping[str, str], name: str) -> bool:
    return configs.get(name, "false").strip().lower() == "true"


def check_remote_storage_kept(current: Mapping[str, str], altered: Mapping[str, str]) -> None:
    """Turning remote storage off on a tiered topic needs remote.log.delete.on.disable=true
    (its remote data is then deleted); Kafka's validateTurningOffRemoteStorageWithDelete."""
    turned_off = _is_true(current, "remote.storage.enable") and not _is_true(
        altered, "remote.storage.enable"
    )
    if turned_off and not _is_true(altered, "remote.log.delete.on.disable"):
        raise InvalidConfig(
            "It is invalid to disable remote storage without deleting remote data. If you want"
            " to keep the remote data and turn to read only, please set"
            " `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable"
            " remote storage and delete all remote data, please set"
            " `remote.storage.enable=false,remote.log.delete.on.disable=true`."
        )


def broker_synonyms(definition: TopicConfigDef) -> tuple[str, ...]:
    """The broker properties that supply a topic config's default, highest precedence first."""
    synonym = definition.broker_synonym
    if synonym is None:
        return ()
    return _SYNONYM_CHAINS.get(synonym, (synonym,))


def broker_value(broker: BrokerConfig, definition: TopicConfigDef) -> str | None:
    """The broker-level value for a topic config, when a broker synonym is set explicitly."""
    chain = broker_synonyms(definition)
    if not any(name in broker.raw for name in chain):
        return None
    if definition.broker_synonym == "log.retention.ms":
        return str(broker.retention_ms)
    if definition.broker_synonym == "log.roll.ms":
        return str(broker.roll_ms)
    return broker.raw[chain[0]]


def effective_value(
    broker: BrokerConfig, overrides: Mapping[str, str], name: str
) -> tuple[str, int]:
    """(value, source) of a topic config: topic override, broker setting, or default."""
    definition = TOPIC_CONFIGS[name]
    if name in overrides:
        return overrides[name], SOURCE_TOPIC
    from_broker = broker_value(broker, definition)
    if from_broker is not None:
        return from_broker.strip(), SOURCE_STATIC_BROKER
    return definition.default, SOURCE_DEFAULT


def log_config_for(broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The LogConfig a partition of a topic with these overrides runs with."""
    fields: dict[str, object] = {
        "producer_id_expiration_ms": broker.int("producer.id.expiration.ms"),
    }
    for definition in TOPIC_CONFIGS.values():
        if definition.log_field is None:
            continue
        value, _ = effective_value(broker, overrides, definition.name)
        fields[definition.log_field] = definition.parse(value)
    return LogConfig(**fields)  # type: ignore[arg-type]
