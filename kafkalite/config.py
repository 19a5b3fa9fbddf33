"""Broker configuration under Apache Kafka's property names.

Read from a `server.properties` file plus `--override key=value` pairs, like
`kafka-server-start.sh`. Unknown properties and bad values raise `ConfigError`,
which the CLI turns into one line and exit code 2.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.logging_config import parse_format, parse_level, parse_levels

HOUR_MS = 3_600_000
# kafkalite's one departure from Kafka's defaults: two weeks of retention where Kafka keeps
# 168 hours. Every default of log.retention.* / retention.ms derives from it.
DEFAULT_RETENTION_HOURS = 2 * 168
DEFAULT_RETENTION_MS = DEFAULT_RETENTION_HOURS * HOUR_MS
I32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# Kafka's ConfigDef types as DescribeConfigs (v3+) reports them (ConfigEntry.ConfigType ordinal).
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = range(1, 8)
TYPE_PASSWORD = 9  # DescribeConfigs hides the value and flags it sensitive
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


class ConfigError(ValueError):
    """A property is unknown, malformed or out of range."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> tuple[Listener, ...]:
    """`PLAINTEXT://127.0.0.1:9092,...` -> listeners; an empty host means all interfaces."""
    listeners = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:\[\]]*):(\d+)", item)
        if not match:
            raise ConfigError(f"listener {item!r} is not NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"listener {item!r} has port out of range")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ConfigError("listeners must name at least one listener")
    return tuple(listeners)


def parse_protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,...` -> {NAME: PROTOCOL}."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name:
            raise ValueError(f"{item!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in mapping:
            raise ValueError(f"listener {name} is mapped twice")
        mapping[name] = protocol
    return mapping


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value.strip().lower() not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value.strip().lower()

    return parse


def _security_protocol(value: str) -> str:
    if value.strip().upper() not in SECURITY_PROTOCOLS:
        raise ValueError(f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
    return value.strip().upper()


def _list(value: str) -> tuple[str, ...]:
    return tuple(filter(None, (part.strip() for part in value.split(","))))


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _int(low: int, high: int = LONG_MAX) -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value.strip())
        if not low <= number <= high:
            raise ValueError(f"must be between {low} and {high}")
        return number

    return parse


def _timestamp_type(value: str) -> str:
    if value.strip() not in ("CreateTime", "LogAppendTime"):
        raise ValueError("expected CreateTime or LogAppendTime")
    return value.strip()


def _str(value: str) -> str:
    return value.strip()


def _ip_counts(value: str) -> str:
    """`address:count[,address:count...]` (Kafka's max.connections.per.ip.overrides)."""
    for part in _list(value):
        address, colon, count = part.rpartition(":")
        if not (colon and count.isdigit()):
            raise ValueError(f"{part!r} is not address:count")
        ipaddress.ip_address(address.strip("[]"))  # (Kafka also takes host names)
    return value.strip()


def _zookeeper_connect(value: str) -> str:
    """`host:port[,host:port...][/chroot]`, as Kafka's zookeeper.connect."""
    servers, slash, chroot = value.strip().partition("/")
    for server in servers.split(","):
        host, colon, port = server.strip().rpartition(":")
        if not (host and colon and port.isdigit() and 0 < int(port) <= 65535):
            raise ValueError(f"{server.strip()!r} is not host:port")
    if slash and (chroot.endswith("/") or "//" in chroot):
        raise ValueError(f"chroot /{chroot} is not a ZooKeeper path")
    return value.strip()


# authorizer.class.name: Kafka's ZooKeeper-era and KRaft authorizers, both served by
# kafkalite/security/authorizer.py.
AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)


def _authorizer_class(value: str) -> str:
    """Empty, or Kafka's AclAuthorizer or StandardAuthorizer class name (full names)"""
    if value.strip() and value.strip() not in AUTHORIZER_CLASSES:
        raise ValueError(f"kafkalite serves {' or '.join(AUTHORIZER_CLASSES)}")
    return value.strip()


# group.consumer.assignors: Kafka lists class names; clients name the assignors.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
DEFAULT_CONSUMER_ASSIGNORS = ",".join(_ASSIGNOR_CLASSES)


def _assignors(value: str) -> tuple[str, ...]:
    names = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        name = _ASSIGNOR_CLASSES.get(item, item)
        if name not in _ASSIGNOR_CLASSES.values():
            raise ValueError(f"unknown assignor {item!r} (kafkalite has uniform and range)")
        names.append(name)
    if not names:
        raise ValueError("at least one assignor is needed")
    return tuple(names)


@dataclass(frozen=True, slots=True)
class Property:
    parse: Callable[[str], object]
    default: str | None
    doc: str
    config_type: int = TYPE_STRING  # Kafka's type of the property


# The properties kafkalite understands, with Kafka's defaults, except retention
# (DEFAULT_RETENTION_HOURS).
PROPERTIES: dict[str, Property] = {
    "broker.id": Property(_int(0, I32_MAX), "0", "id of this broker", TYPE_INT),
    "node.id": Property(_int(0, I32_MAX), None, "alias of broker.id (KRaft name)", TYPE_INT),
    "listeners": Property(parse_listeners, "PLAINTEXT://127.0.0.1:9092", "where to listen"),
    "advertised.listeners": Property(parse_listeners, None, "what clients are told"),
    "log.dirs": Property(_str, None, "data directories, comma-separated (JBOD)"),
    "log.dir": Property(_str, "/tmp/kafka-logs", "data directory when log.dirs is unset"),
    "num.partitions": Property(
        _int(1, I32_MAX), "1", "partitions of auto-created topics", TYPE_INT
    ),
    "default.replication.factor": Property(_int(1, 32767), "1", "replicas of new topics", TYPE_INT),
    "auto.create.topics.enable": Property(
        _bool, "true", "create topics on first use", TYPE_BOOLEAN
    ),
    "delete.topic.enable": Property(_bool, "true", "allow DeleteTopics", TYPE_BOOLEAN),
    "log.segment.bytes": Property(_int(14, I32_MAX), str(1024**3), "segment roll size", TYPE_INT),
    "log.roll.ms": Property(_int(1), None, "segment roll age", TYPE_LONG),
    "log.roll.hours": Property(_int(1, I32_MAX), "168", "segment roll age in hours", TYPE_INT),
    "log.retention.ms": Property(_int(-1), None, "retention by time (-1: forever)", TYPE_LONG),
    "log.retention.minutes": Property(_int(-1, I32_MAX), None, "retention in minutes", TYPE_INT),
    "log.retention.hours": Property(
        _int(-1, I32_MAX), str(DEFAULT_RETENTION_HOURS), "retention in hours", TYPE_INT
    ),
    "log.retention.bytes": Property(_int(-1), "-1", "retention by size per partition", TYPE_LONG),
    "log.retention.check.interval.ms": Property(
        _int(1), "300000", "retention check period", TYPE_LONG
    ),
    "log.cleaner.enable": Property(
        _bool, "true", "compact cleanup.policy=compact topics", TYPE_BOOLEAN
    ),
    "log.cleaner.backoff.ms": Property(_int(0), "15000", "pause between cleaner runs", TYPE_LONG),
    "log.index.interval.bytes": Property(
        _int(0, I32_MAX), "4096", "offset index density", TYPE_INT
    ),
    "log.index.size.max.bytes": Property(
        _int(4, I32_MAX), str(10 * 1024**2), "index cap", TYPE_INT
    ),
    "log.message.timestamp.type": Property(_timestamp_type, "CreateTime", "timestamp source"),
    "log.flush.interval.messages": Property(
        _int(1), str(LONG_MAX), "fsync every N records", TYPE_LONG
    ),
    "log.flush.interval.ms": Property(_int(0), None, "fsync every N ms", TYPE_LONG),
    "log.flush.scheduler.interval.ms": Property(
        _int(0), str(LONG_MAX), "flush check period", TYPE_LONG
    ),
    "message.max.bytes": Property(_int(0, I32_MAX), "1048588", "largest record batch", TYPE_INT),
    "socket.request.max.bytes": Property(
        _int(1, I32_MAX), "104857600", "largest request", TYPE_INT
    ),
    "queued.max.request.bytes": Property(
        _int(-1),
        str(200 * 1024**2),
        "bytes of unanswered requests after which no more are read (-1: unbounded)",
        TYPE_LONG,
    ),
    "max.connections": Property(
        _int(0, I32_MAX),
        str(2**31 - 1),
        "connections the broker holds (per listener too); at the bound new ones wait",
        TYPE_INT,
    ),
    "max.connection.creation.rate": Property(
        _int(0, I32_MAX),
        str(2**31 - 1),
        "connections a second the broker accepts (per listener too); more wait",
        TYPE_INT,
    ),
    "max.connections.per.ip": Property(
        _int(0, I32_MAX), str(2**31 - 1), "connections one client address may hold", TYPE_INT
    ),
    "max.connections.per.ip.overrides": Property(
        _ip_counts, "", "per-address exceptions to it (address:count,...)", TYPE_STRING
    ),
    "quota.window.num": Property(
        _int(1, I32_MAX), "11", "samples retained for client quotas", TYPE_INT
    ),
    "quota.window.size.seconds": Property(
        _int(1, I32_MAX), "1", "time span of each client quota sample", TYPE_INT
    ),
    "controller.quota.window.num": Property(
        _int(1, I32_MAX), "11", "samples retained for controller mutation quotas", TYPE_INT
    ),
    "controller.quota.window.size.seconds": Property(
        _int(1, I32_MAX), "1", "time span of each controller mutation quota sample", TYPE_INT
    ),
    "kafkalite.max.partitions.per.request": Property(
        _int(1, I32_MAX), "10000", "partitions one CreateTopics/CreatePartitions may add", TYPE_INT
    ),
    "kafkalite.max.partitions": Property(
        _int(1, I32_MAX), "10000", "partitions this broker may hold in all", TYPE_INT
    ),
    "min.insync.replicas": Property(
        _int(1, 32767), "1", "replicas that must ack acks=all", TYPE_INT
    ),
    "cluster.id": Property(_str, None, "cluster id (generated and stored when unset)"),
    "producer.id.expiration.ms": Property(
        _int(1), "86400000", "idle producer state lifetime", TYPE_INT
    ),
    "offsets.topic.num.partitions": Property(
        _int(1, I32_MAX), "50", "__consumer_offsets size", TYPE_INT
    ),
    "offsets.retention.minutes": Property(_int(1, I32_MAX), "10080", "offsets lifetime", TYPE_INT),
    "offsets.commit.timeout.ms": Property(
        _int(1, I32_MAX), "5000", "wait for an offset commit's replication", TYPE_INT
    ),
    "offsets.retention.check.interval.ms": Property(
        _int(1), "600000", "offset expiry period", TYPE_LONG
    ),
    "offsets.topic.segment.bytes": Property(
        _int(1, I32_MAX), "104857600", "__consumer_offsets segment size", TYPE_INT
    ),
    "offsets.topic.replication.factor": Property(
        _int(1, 32767), "1", "__consumer_offsets RF", TYPE_SHORT
    ),
    "transaction.state.log.num.partitions": Property(
        _int(1, I32_MAX), "50", "__transaction_state size", TYPE_INT
    ),
    "transaction.state.log.replication.factor": Property(
        _int(1, 32767), "1", "__transaction_state RF", TYPE_SHORT
    ),
    "transaction.state.log.min.isr": Property(
        _int(1, I32_MAX), "1", "__transaction_state min.insync.replicas", TYPE_INT
    ),
    "transaction.state.log.segment.bytes": Property(
        _int(1, I32_MAX), "104857600", "__transaction_state segment size", TYPE_INT
    ),
    "transaction.max.timeout.ms": Property(
        _int(1, I32_MAX), "900000", "largest transaction.timeout.ms", TYPE_INT
    ),
    "transactional.id.expiration.ms": Property(
        _int(1, I32_MAX), "604800000", "idle transactional id lifetime", TYPE_INT
    ),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": Property(
        _int(1, I32_MAX), "10000", "how often timed-out transactions are aborted", TYPE_INT
    ),
    "transaction.remove.expired.transaction.cleanup.interval.ms": Property(
        _int(1, I32_MAX), "3600000", "how often expired transactional ids go", TYPE_INT
    ),
    "transaction.partition.verification.enable": Property(
        _bool, "true", "leaders verify transactional produce (KIP-890)", TYPE_BOOLEAN
    ),
    "offset.metadata.max.bytes": Property(
        _int(0, I32_MAX), "4096", "commit metadata limit", TYPE_INT
    ),
    "group.initial.rebalance.delay.ms": Property(
        _int(0), "3000", "first rebalance delay", TYPE_INT
    ),
    "group.min.session.timeout.ms": Property(_int(0, I32_MAX), "6000", "least session", TYPE_INT),
    "group.max.session.timeout.ms": Property(
        _int(0, I32_MAX), "1800000", "longest session", TYPE_INT
    ),
    "group.max.size": Property(_int(1, I32_MAX), str(I32_MAX), "members per group", TYPE_INT),
    "group.consumer.session.timeout.ms": Property(
        _int(1, I32_MAX), "45000", "consumer group member session", TYPE_INT
    ),
    "group.consumer.heartbeat.interval.ms": Property(
        _int(1, I32_MAX), "5000", "consumer group heartbeat interval", TYPE_INT
    ),
    "group.consumer.max.size": Property(
        _int(1, I32_MAX), str(I32_MAX), "members per consumer group", TYPE_INT
    ),
    "group.consumer.assignors": Property(
        _assignors, DEFAULT_CONSUMER_ASSIGNORS, "consumer group assignors, default first", TYPE_LIST
    ),
    # Share groups (KIP-932), Kafka 4.4's names, defaults and bounds.
    "group.share.record.lock.duration.ms": Property(
        _int(1000, 3_600_000), "30000", "share record acquisition lock", TYPE_INT
    ),
    "group.share.delivery.count.limit": Property(
        _int(2, 10), "5", "deliveries before a share record is archived", TYPE_INT
    ),
    "group.share.partition.max.record.locks": Property(
        _int(100, 10_000), "2000", "in-flight records per share-partition", TYPE_INT
    ),
    "group.share.max.share.sessions": Property(
        _int(1, I32_MAX), "2000", "share sessions per broker", TYPE_INT
    ),
    "group.share.session.timeout.ms": Property(
        _int(1, I32_MAX), "45000", "share group member session", TYPE_INT
    ),
    "group.share.heartbeat.interval.ms": Property(
        _int(1, I32_MAX), "5000", "share group heartbeat interval", TYPE_INT
    ),
    "group.share.max.size": Property(_int(1, 1000), "200", "members per share group", TYPE_SHORT),
    # Dead-letter topics of share groups (KIP-1191), Kafka 4.4's names and defaults.
    "errors.deadletterqueue.topic.name.prefix": Property(
        _str, "dlq.", "the prefix a share group's dead-letter topic name must have"
    ),
    "errors.deadletterqueue.auto.create.topics.enable": Property(
        _bool, "false", "create a share group's dead-letter topic on first use", TYPE_BOOLEAN
    ),
    # The bounds of the share group configs (kafka-configs --entity-type groups).
    "group.share.min.record.lock.duration.ms": Property(
        _int(1000, 30_000), "15000", "least share.record.lock.duration.ms", TYPE_INT
    ),
    "group.share.max.record.lock.duration.ms": Property(
        _int(30_000, 3_600_000), "60000", "largest share.record.lock.duration.ms", TYPE_INT
    ),
    "group.share.min.delivery.count.limit": Property(
        _int(2, 5), "2", "least share.delivery.count.limit", TYPE_INT
    ),
    "group.share.max.delivery.count.limit": Property(
        _int(5, 25), "10", "largest share.delivery.count.limit", TYPE_INT
    ),
    "group.share.min.partition.max.record.locks": Property(
        _int(100, 2000), "100", "least share.partition.max.record.locks", TYPE_INT
    ),
    "group.share.max.partition.max.record.locks": Property(
        _int(2000, 10_000), "4000", "largest share.partition.max.record.locks", TYPE_INT
    ),
    "group.share.min.session.timeout.ms": Property(
        _int(1, I32_MAX), "45000", "least share.session.timeout.ms", TYPE_INT
    ),
    "group.share.max.session.timeout.ms": Property(
        _int(1, I32_MAX), "60000", "largest share.session.timeout.ms", TYPE_INT
    ),
    "group.share.min.heartbeat.interval.ms": Property(
        _int(1, I32_MAX), "5000", "least share.heartbeat.interval.ms", TYPE_INT
    ),
    "group.share.max.heartbeat.interval.ms": Property(
        _int(1, I32_MAX), "15000", "largest share.heartbeat.interval.ms", TYPE_INT
    ),
    "share.coordinator.state.topic.num.partitions": Property(
        _int(1, I32_MAX), "50", "__share_group_state size", TYPE_INT
    ),
    "share.coordinator.state.topic.replication.factor": Property(
        _int(1, 32767), "1", "__share_group_state RF", TYPE_SHORT
    ),
    "share.coordinator.state.topic.min.isr": Property(
        _int(1, 32767), "1", "__share_group_state min.insync.replicas", TYPE_SHORT
    ),
    "share.coordinator.snapshot.update.records.per.snapshot": Property(
        _int(0, 500), "500", "ShareUpdate records between ShareSnapshots", TYPE_INT
    ),
    "share.coordinator.state.topic.segment.bytes": Property(
        _int(1, I32_MAX), "104857600", "__share_group_state segment size", TYPE_INT
    ),
    # Cluster mode (zookeeper.connect set): parsed and validated; the replication work uses them.
    "zookeeper.connect": Property(_zookeeper_connect, None, "ZooKeeper ensemble (cluster mode)"),
    "zookeeper.session.timeout.ms": Property(
        _int(1, I32_MAX), "18000", "ZooKeeper session timeout", TYPE_INT
    ),
    "zookeeper.connection.timeout.ms": Property(
        _int(1, I32_MAX), None, "ZooKeeper connect wait (unset: the session timeout)", TYPE_INT
    ),
    # kafkalite's own failure detector (cluster/broker_liveness.py): 0 turns the probes off.
    "kafkalite.liveness.probe.interval.ms": Property(
        _int(0, I32_MAX), "200", "probe of each other broker (0: sessions only)", TYPE_INT
    ),
    "kafkalite.liveness.probe.timeout.ms": Property(
        _int(1, I32_MAX), "6000", "unanswered probe: broker declared dead", TYPE_INT
    ),
    "broker.rack": Property(_str, None, "rack of this broker, for replica placement"),
    "replica.lag.time.max.ms": Property(
        _int(0), "30000", "follower lag before ISR exit", TYPE_LONG
    ),
    "replica.socket.timeout.ms": Property(
        _int(-1, I32_MAX), "30000", "follower fetch request timeout", TYPE_INT
    ),
    "replica.fetch.max.bytes": Property(
        _int(0, I32_MAX), "1048576", "follower fetch size", TYPE_INT
    ),
    "replica.fetch.min.bytes": Property(_int(0, I32_MAX), "1", "follower fetch min", TYPE_INT),
    "replica.fetch.wait.max.ms": Property(_int(0, I32_MAX), "500", "follower wait", TYPE_INT),
    "replica.fetch.backoff.ms": Property(
        _int(0, I32_MAX), "1000", "follower retry pause", TYPE_INT
    ),
    "num.replica.fetchers": Property(_int(1, I32_MAX), "1", "fetcher tasks", TYPE_INT),
    "unclean.leader.election.enable": Property(
        _bool, "false", "leaders from outside the ISR", TYPE_BOOLEAN
    ),
    "auto.leader.rebalance.enable": Property(
        _bool, "true", "move leaders back to preferred", TYPE_BOOLEAN
    ),
    "leader.imbalance.check.interval.seconds": Property(
        _int(1), "300", "rebalance check period", TYPE_LONG
    ),
    "leader.imbalance.per.broker.percentage": Property(
        _int(0, I32_MAX), "10", "tolerated imbalance", TYPE_INT
    ),
    "controlled.shutdown.enable": Property(
        _bool, "true", "move leadership away on SIGTERM", TYPE_BOOLEAN
    ),
    "controlled.shutdown.max.retries": Property(
        _int(0, I32_MAX), "3", "controlled shutdown attempts", TYPE_INT
    ),
    "controlled.shutdown.retry.backoff.ms": Property(
        _int(0), "5000", "wait per controlled shutdown attempt", TYPE_LONG
    ),
    "request.timeout.ms": Property(_int(0, I32_MAX), "30000", "acks=all wait cap", TYPE_INT),
    # Delayed delivery (broker/delayed_delivery.py): the defaults of the topic configs of the
    # same names, and how late a held record may become readable at most.
    "kafkalite.delayed.delivery.enable": Property(
        _bool, "false", "topics take delayed records by default", TYPE_BOOLEAN
    ),
    "kafkalite.delayed.delivery.max.ms": Property(
        _int(0), str(7 * 24 * HOUR_MS), "longest delay a record may ask for", TYPE_LONG
    ),
    "kafkalite.delayed.delivery.precision.ms": Property(
        _int(1, I32_MAX), "100", "held records are readable at most this late", TYPE_LONG
    ),
    # kafkalite's own logging (Kafka configures it in log4j.properties): kafkalite/logging_config.py
    "kafkalite.log.level": Property(parse_level, "INFO", "level of every logger"),
    "kafkalite.log.levels": Property(parse_levels, "", "logger=LEVEL,... per-logger levels"),
    "kafkalite.log.format": Property(parse_format, "text", "text, or json (one object a line)"),
    # Not Kafka properties (Kafka exports metrics through JMX and an agent): Prometheus
    # /metrics, /health and /ready over HTTP; -1 disables, 0 takes a free port.
    "kafkalite.metrics.port": Property(_int(-1, 65535), "-1", "Prometheus HTTP port", TYPE_INT),
    "kafkalite.metrics.host": Property(_str, "127.0.0.1", "Prometheus HTTP address"),
    # Security (kafkalite/security/): each may also be set per listener,
    # `listener.name.<listener>.<property>`, as in Kafka.
    "listener.security.protocol.map": Property(
        parse_protocol_map, DEFAULT_PROTOCOL_MAP, "listener name -> security protocol"
    ),
    "ssl.keystore.type": Property(_choice("jks", "pem", "pkcs12"), "JKS", "PEM or PKCS12"),
    "ssl.keystore.location": Property(_str, None, "key and certificate chain file"),
    "ssl.keystore.password": Property(_str, None, "keystore password", TYPE_PASSWORD),
    "ssl.keystore.key": Property(_str, None, "inline PEM private key", TYPE_PASSWORD),
    "ssl.keystore.certificate.chain": Property(
        _str, None, "inline PEM certificate chain", TYPE_PASSWORD
    ),
    "ssl.key.password": Property(_str, None, "private key password", TYPE_PASSWORD),
    "ssl.truststore.type": Property(_choice("jks", "pem", "pkcs12"), "JKS", "PEM or PKCS12"),
    "ssl.truststore.location": Property(_str, None, "trusted CA certificates file"),
    "ssl.truststore.password": Property(_str, None, "truststore password", TYPE_PASSWORD),
    "ssl.truststore.certificates": Property(
        _str, None, "inline PEM trusted certificates", TYPE_PASSWORD
    ),
    "ssl.client.auth": Property(
        _choice("none", "requested", "required"), "none", "client certificates"
    ),
    "ssl.enabled.protocols": Property(_list, "TLSv1.2,TLSv1.3", "TLS versions", TYPE_LIST),
    "ssl.principal.mapping.rules": Property(
        _str, "DEFAULT", "client certificate subject -> principal name", TYPE_STRING
    ),
    "sasl.enabled.mechanisms": Property(_list, "GSSAPI", "SASL mechanisms served", TYPE_LIST),
    "sasl.server.max.receive.size": Property(
        _int(1, I32_MAX), "524288", "largest SASL packet before authentication", TYPE_INT
    ),
    "connection.failed.authentication.delay.ms": Property(
        _int(0, I32_MAX), "100", "delay before closing a failed authentication", TYPE_INT
    ),
    # Inter-broker traffic (replication, transaction markers, forwarded requests): on
    # inter.broker.listener.name, or the listener named as security.inter.broker.protocol;
    # with neither set, on the first advertised listener (kafkalite's rule before them).
    "inter.broker.listener.name": Property(
        _str, None, "listener the brokers talk to each other on", TYPE_STRING
    ),
    "security.inter.broker.protocol": Property(
        _security_protocol,
        "PLAINTEXT",
        "protocol (and so listener name) of inter-broker traffic",
    ),
    "sasl.mechanism.inter.broker.protocol": Property(
        _str, "GSSAPI", "SASL mechanism brokers log in to each other with", TYPE_STRING
    ),
    "connections.max.reauth.ms": Property(
        _int(0), "0", "SASL session lifetime; clients re-authenticate (KIP-368)", TYPE_LONG
    ),
    # ACLs (kafkalite/security/authorizer.py): either of Kafka's authorizers' names turns
    # them on; "" (the default) serves everyone everything, as Kafka without an authorizer.
    "authorizer.class.name": Property(_authorizer_class, "", "ACL authorizer (Kafka's names)"),
    "super.users": Property(_str, "", "principals allowed everything (User:a;User:b)"),
    "allow.everyone.if.no.acl.found": Property(
        _bool, "false", "a resource without ACLs is open to all", TYPE_BOOLEAN
    ),
    # Not a Kafka property (Kafka relies on connections.max.idle.ms): TLS handshake and SASL
    # exchange must finish within this, or the connection is closed.
    "kafkalite.authentication.timeout.ms": Property(
        _int(1, I32_MAX), "10000", "TLS handshake and SASL exchange deadline", TYPE_INT
    ),
    # Tiered storage (KIP-405; kafkalite/storage/remote/), Kafka's names; the S3 store's
    # settings under `rsm.config.` with the names of Aiven's tiered-storage plugin.
    "remote.log.storage.system.enable": Property(
        _bool, "false", "tiered storage on this broker", TYPE_BOOLEAN
    ),
    "remote.log.manager.task.interval.ms": Property(
        _int(1), "30000", "period of the upload and remote retention task", TYPE_LONG
    ),
    "remote.fetch.max.wait.ms": Property(
        _int(1, I32_MAX), "500", "longest wait for a read from remote storage", TYPE_INT
    ),
    "rsm.config.storage.s3.endpoint.url": Property(_str, None, "S3 endpoint (default: AWS)"),
    "rsm.config.storage.s3.bucket.name": Property(_str, None, "S3 bucket of the segments"),
    "rsm.config.storage.s3.region": Property(_str, None, "S3 region"),
    "rsm.config.storage.s3.path.style.access.enabled": Property(
        _bool, None, "path-style S3 URLs (default: the client decides)", TYPE_BOOLEAN
    ),
    "rsm.config.storage.aws.access.key.id": Property(
        _str, None, "S3 access key (default: the AWS credential chain)", TYPE_PASSWORD
    ),
    "rsm.config.storage.aws.secret.access.key": Property(
        _str, None, "S3 secret key (default: the AWS credential chain)", TYPE_PASSWORD
    ),
    "rsm.config.key.prefix": Property(_str, "", "prefix of every object key"),
    # A cluster's remote segment lists: the __remote_log_metadata topic (Kafka's names).
    "rlmm.config.remote.log.metadata.topic.num.partitions": Property(
        _int(1, I32_MAX), "50", "partitions of __remote_log_metadata", TYPE_INT
    ),
    "rlmm.config.remote.log.metadata.topic.replication.factor": Property(
        _int(1, 32767), "3", "replication factor of __remote_log_metadata", TYPE_SHORT
    ),
    "rlmm.config.remote.log.metadata.consume.wait.ms": Property(
        _int(1), "120000", "longest wait for a metadata write to be consumed back", TYPE_LONG
    ),
}
# The properties a listener may override (`listener.name.<listener>.<name>`), and the
# per-mechanism JAAS config (`listener.name.<listener>.<mechanism>.sasl.jaas.config`).
LISTENER_PROPERTIES = frozenset(
    name
    for name in PROPERTIES
    if name.startswith(("ssl.", "sasl.", "connection.failed", "connections.max.reauth"))
    or name in ("max.connections", "max.connection.creation.rate")
)
_LISTENER_PREFIXED = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")
_JAAS_CONFIG = re.compile(r"[a-z0-9-]+\.sasl\.jaas\.config")


def listener_property(name: str) -> tuple[str, str] | None:
    """(listener, property) of a `listener.name.<listener>.<property>` name Kafka accepts."""
    match = _LISTENER_PREFIXED.fullmatch(name)
    if match is None:
        return None
    listener, prop = match.groups()
    if prop in LISTENER_PROPERTIES or _JAAS_CONFIG.fullmatch(prop):
        return listener.upper(), prop
    return None


def is_password(name: str) -> bool:
    """A property whose value is secret (never shown by DescribeConfigs or logs)."""
    scoped = listener_property(name)
    prop = scoped[1] if scoped else name
    return prop.endswith("sasl.jaas.config") or (
        prop in PROPERTIES and PROPERTIES[prop].config_type == TYPE_PASSWORD
    )


# Kafka's defaults that would stop a single node from working apply in cluster mode only,
# so `kafkalite serve` without zookeeper.connect behaves as before.
CLUSTER_MODE_DEFAULTS: dict[str, str] = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed view of the properties the broker uses; `raw` keeps every value as given."""

    raw: Mapping[str, str] = field(default_factory=dict)

    @property
    def cluster_mode(self) -> bool:
        return self.raw.get("zookeeper.connect") is not None

    def default(self, name: str) -> str | None:
        if self.cluster_mode and name in CLUSTER_MODE_DEFAULTS:
            return CLUSTER_MODE_DEFAULTS[name]
        return PROPERTIES[name].default

    def _get(self, name: str) -> object:
        value = self.raw.get(name, self.default(name))
        return None if value is None else PROPERTIES[name].parse(value)

    @property
    def broker_id(self) -> int:
        node_id = self._get("node.id")
        return node_id if node_id is not None else self._get("broker.id")  # type: ignore[return-value]

    @property
    def listeners(self) -> tuple[Listener, ...]:
        return self._get("listeners")  # type: ignore[return-value]

    @property
    def advertised_listeners(self) -> tuple[Listener, ...]:
        advertised = self._get("advertised.listeners") or self.listeners
        return tuple(
            Listener(lst.name, lst.host or "localhost", lst.port)
            for lst in advertised  # type: ignore[union-attr]
        )

    @property
    def log_dir(self) -> Path:
        """The first log directory: it also holds the broker's metadata."""
        return self.log_dirs[0]

    @property
    def log_dirs(self) -> list[Path]:
        """Every directory of `log.dirs` (JBOD: partitions are spread over them)."""
        dirs = self._get("log.dirs") or self._get("log.dir")
        return [Path(d.strip()) for d in str(dirs).split(",") if d.strip()]

    @property
    def retention_ms(self) -> int:
        for name, factor in (
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", HOUR_MS),
        ):
            value = self._get(name)
            if value is not None:
                return -1 if value == -1 else value * factor  # type: ignore[operator]
        raise AssertionError("log.retention.hours has a default")

    @property
    def roll_ms(self) -> int:
        roll_ms = self._get("log.roll.ms")
        return roll_ms if roll_ms is not None else self.int("log.roll.hours") * HOUR_MS  # type: ignore[return-value]

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        return self._get("group.consumer.assignors")  # type: ignore[return-value]

    @property
    def protocol_map(self) -> dict[str, str]:
        return self._get("listener.security.protocol.map")  # type: ignore[return-value]

    @property
    def inter_broker_listener(self) -> str:
        """The listener name brokers talk to each other on (Kafka's
        interBrokerListenerName); by default the first advertised listener."""
        if named := self.str("inter.broker.listener.name"):
            return named.strip().upper()
        if "security.inter.broker.protocol" in self.raw:
            return str(self.str("security.inter.broker.protocol"))
        return self.advertised_listeners[0].name

    def listener_str(self, listener: str, name: str) -> str | None:
        """A property as `listener` sees it: its `listener.name.<l>.` override, else the
        broker-wide value."""
        value = self.raw.get(f"listener.name.{listener.lower()}.{name}")
        if value is not None:
            return value.strip()
        if name not in PROPERTIES:  # a per-mechanism JAAS config is per listener only
            return None
        value = self.raw.get(name, self.default(name))
        return None if value is None else value.strip()

    def int(self, name: str) -> int:
        return self._get(name)  # type: ignore[return-value]

    def bool(self, name: str) -> bool:
        return self._get(name)  # type: ignore[return-value]

    def str(self, name: str) -> str | None:
        return self._get(name)  # type: ignore[return-value]


def _check_listeners(config: BrokerConfig) -> None:
    """Kafka's listener checks: names unique and mapped to a protocol; advertised listeners
    are listeners. A cluster's brokers talk to each other on the first listener, which
    kafkalite only does in plaintext so far."""
    names = [listener.name for listener in config.listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"listeners: each listener name must be unique, got {names}")
    mapping = config.protocol_map
    for name in names:
        if name not in mapping:
            raise ConfigError(
                f"listener {name} is not in listener.security.protocol.map ({mapping})"
            )
    for advertised in config.advertised_listeners:
        if advertised.name not in names:
            raise ConfigError(f"advertised listener {advertised.name} is not in listeners")
    _check_inter_broker_listener(config)


def _check_inter_broker_listener(config: BrokerConfig) -> None:
    """Kafka's checks of the inter-broker listener (what the brokers connect with is checked
    by security/inter_broker.py at startup)."""
    if "inter.broker.listener.name" in config.raw and (
        "security.inter.broker.protocol" in config.raw
    ):
        raise ConfigError(  # Kafka's words
            "Only one of inter.broker.listener.name and security.inter.broker.protocol"
            " should be set."
        )
    listener = config.inter_broker_listener
    if listener not in [each.name for each in config.advertised_listeners]:
        raise ConfigError(
            f"inter.broker.listener.name must be a listener name defined in"
            f" advertised.listeners. The valid options based on currently configured"
            f" listeners are {','.join(each.name for each in config.advertised_listeners)}"
        )


def read_properties(path: Path) -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value`, `#`/`!` comments, blank lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read config file {path}: byte {exc.start} is not UTF-8"
        ) from None
    props: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", stripped)
        if not match:
            raise ConfigError(f"{path}:{number}: expected key=value, got {stripped!r}")
        props[match.group(1)] = match.group(2)
    return props


def parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--override {text!r} is not key=value")
    return key.strip(), value


def build_config(
    file_props: Mapping[str, str], overrides: Iterable[tuple[str, str]] = ()
) -> BrokerConfig:
    """Merge file and overrides, reject unknown names, and check every value parses."""
    raw = dict(file_props)
    raw.update(overrides)
    for name, value in raw.items():
        scoped = listener_property(name)
        prop = PROPERTIES.get(scoped[1] if scoped else name)
        if prop is None and scoped is not None:
            continue  # a JAAS config: read by kafkalite/security/jaas.py
        if prop is None:
            raise ConfigError(f"unknown property {name!r}")
        try:
            prop.parse(value)
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"invalid value {value!r} for {name}: {exc}") from None
    config = BrokerConfig(raw)
    _check_listeners(config)
    if config.bool("remote.log.storage.system.enable") and not config.str(
        "rsm.config.storage.s3.bucket.name"
    ):
        raise ConfigError(
            "remote.log.storage.system.enable=true needs rsm.config.storage.s3.bucket.name"
        )
    if config.int("replica.fetch.wait.max.ms") > config.int("replica.lag.time.max.ms"):
        raise ConfigError(  # Kafka's check, with its words
            "replica.fetch.wait.max.ms should always be less than or equal to"
            " replica.lag.time.max.ms to prevent frequent changes in ISR"
        )
    if config.int("replica.fetch.wait.max.ms") > config.int("replica.socket.timeout.ms"):
        raise ConfigError(  # Kafka's check, with its words
            "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"
            " to prevent unnecessary socket timeouts"
        )
    return config
