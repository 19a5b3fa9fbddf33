"""Kafka's ZooKeeper layout, sans-IO: znode paths and their JSON, as Kafka 3.x writes them.

Mirrors Kafka's kafka/zk/ZkData.scala (object names in the comments), so a cluster's znodes read
the same in `zkCli` as a Kafka-on-ZooKeeper cluster's and each side decodes the other's JSON.
Kafka writes with Jackson: compact JSON, and some numbers as strings (timestamps, producer id
bounds, the cluster id's version), kept here. Decoders accept what Kafka accepts (older
versions, missing optional fields); a malformed znode raises `ZkDataError`.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# -- paths -------------------------------------------------------------------------------------

CLUSTER_ID = "/cluster/id"  # ClusterIdZNode
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"  # BrokerIdsZNode: ephemeral children, one per live broker
BROKER_SEQID = "/brokers/seqid"  # BrokerSequenceIdZNode (generated broker ids)
TOPICS = "/brokers/topics"  # TopicsZNode
CONTROLLER = "/controller"  # ControllerZNode (ephemeral)
CONTROLLER_EPOCH = "/controller_epoch"  # ControllerEpochZNode
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"  # ConfigEntityChangeNotificationZNode
CONFIG_CHANGE_PREFIX = "config_change_"  # sequential children of CONFIG_CHANGES
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"  # DeleteTopicsZNode
REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # ReassignPartitionsZNode (legacy)
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"  # IsrChangeNotificationZNode
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"  # ProducerIdBlockZNode
CONSUMERS = "/consumers"  # the old consumer's path, still created by Kafka

# ConfigType.ALL of ZooKeeper-era Kafka; "<default>" names the cluster-wide default entity
# (ZooKeeperInternals). Kafka 4's ConfigType.GROUP ("groups", kept by KRaft only) is kept
# here the same way (cluster/zk_group_config_store.py), created on first use.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")
GROUPS = "groups"
DEFAULT_ENTITY = "<default>"

# ZkData.PersistentZkPaths: created (empty) by every broker at startup.
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def config_path(entity_type: str, entity_name: str) -> str:
    """`/config/topics/<t>`, `/config/brokers/<id>` or `/config/brokers/<default>`, ..."""
    if entity_type not in CONFIG_ENTITY_TYPES and entity_type != GROUPS:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    return f"{CONFIG}/{entity_type}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- JSON --------------------------------------------------------------------------------------


class ZkDataError(ValueError):
    """A znode's content is not what Kafka writes there."""


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _decode(data: bytes | None, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data or b"")
    except ValueError as exc:
        raise ZkDataError(f"{what}: not JSON: {data!r}") from exc
    if not isinstance(value, dict):
        raise ZkDataError(f"{what}: not a JSON object: {data!r}")
    return value


def _field(value: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return value[key]
    except KeyError:
        raise ZkDataError(f"{what}: no {key!r} in {dict(value)!r}") from None


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): the 16 bytes in url-safe base64, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return uuid.UUID(bytes=raw)
    except ValueError as exc:
        raise ZkDataError(f"not a Kafka uuid: {text!r}") from exc


# -- /cluster/id -------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})  # Kafka writes the version as a string


def decode_cluster_id(data: bytes) -> str:
    return str(_field(_decode(data, CLUSTER_ID), "id", CLUSTER_ID))


# -- /brokers/ids/<id> -------------------------------------------------------------------------

BROKER_INFO_VERSION = 5
# Kafka's listener.security.protocol.map default: a listener named after a protocol uses it.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str  # listener name, e.g. PLAINTEXT or INTERNAL
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker's registration (BrokerIdZNode, JSON version 5)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    jmx_port: int = -1
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # name -> (min, max)
    version: int = BROKER_INFO_VERSION

    @property
    def path(self) -> str:
        return broker_path(self.broker_id)

    def encode(self) -> bytes:
        # host/port: the first PLAINTEXT endpoint, for clients older than endpoints (Kafka's).
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        value: dict[str, Any] = {
            "version": self.version,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.connection_string for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None:
            value["rack"] = self.rack
        value["listener_security_protocol_map"] = {
            e.listener: e.security_protocol for e in self.endpoints
        }
        value["features"] = {
            name: {"min_version": low, "max_version": high}
            for name, (low, high) in self.features.items()
        }
        return _encode(value)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerInfo:
        what = broker_path(broker_id)
        value = _decode(data, what)
        version = int(_field(value, "version", what))
        if version < 1:
            raise ZkDataError(f"{what}: unsupported registration version {version}")
        if version == 1:
            host, port = _field(value, "host", what), int(_field(value, "port", what))
            endpoints: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", host, port),)
        else:
            protocols = value.get("listener_security_protocol_map") or {
                name: name for name in SECURITY_PROTOCOLS
            }
            endpoints = tuple(
                _parse_endpoint(text, protocols, what) for text in _field(value, "endpoints", what)
            )
        features = {
            name: (int(r.get("min_version", 1)), int(r["max_version"]))
            for name, r in (value.get("features") or {}).items()
        }
        return cls(
            broker_id=broker_id,
            endpoints=endpoints,
            rack=value.get("rack"),
            timestamp_ms=int(value.get("timestamp", 0)),
            jmx_port=int(value.get("jmx_port", -1)),
            features=features,
            version=version,
        )


def _parse_endpoint(text: str, protocols: Mapping[str, str], what: str) -> Endpoint:
    listener, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if not (sep and colon and port.isdigit()):
        raise ZkDataError(f"{what}: endpoint {text!r} is not LISTENER://host:port")
    protocol = protocols.get(listener)
    if protocol is None:
        raise ZkDataError(f"{what}: no security protocol for listener {listener!r}")
    return Endpoint(listener, host.strip("[]"), int(port), protocol)


# -- /controller and /controller_epoch ---------------------------------------------------------

CONTROLLER_VERSION = 2
INITIAL_CONTROLLER_EPOCH = 0  # KafkaController.InitialControllerEpoch


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    broker_id: int
    timestamp_ms: int = 0
    kraft_controller_epoch: int = -1  # -1: a ZooKeeper-mode controller (KIP-866's field)

    def encode(self) -> bytes:
        return _encode(
            {
                "version": CONTROLLER_VERSION,
                "brokerid": self.broker_id,
                "timestamp": str(self.timestamp_ms),
                "kraftControllerEpoch": self.kraft_controller_epoch,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> ControllerInfo:
        value = _decode(data, CONTROLLER)
        return cls(
            broker_id=int(_field(value, "brokerid", CONTROLLER)),
            timestamp_ms=int(value.get("timestamp", 0)),
            kraft_controller_epoch=int(value.get("kraftControllerEpoch", -1)),
        )


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"{CONTROLLER_EPOCH}: not an integer: {data!r}") from exc


# -- /brokers/topics/<topic> -------------------------------------------------------------------

TOPIC_VERSION = 3


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """A topic's id and replica assignment per partition (TopicZNode)."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: uuid.UUID | None = None

    def encode(self) -> bytes:
        ordered = sorted(self.partitions.items())
        value: dict[str, Any] = {
            "version": TOPIC_VERSION,
            "partitions": {str(p): list(a.replicas) for p, a in ordered},
            "adding_replicas": {
                str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas
            },
            "removing_replicas": {
                str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas
            },
        }
        if self.topic_id is not None:
            value["topic_id"] = kafka_uuid(self.topic_id)
        return _encode(value)

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        what = topic_path(topic)
        value = _decode(data, what)
        adding = value.get("adding_replicas") or {}
        removing = value.get("removing_replicas") or {}
        partitions = {
            int(p): ReplicaAssignment(
                tuple(replicas), tuple(adding.get(p, ())), tuple(removing.get(p, ()))
            )
            for p, replicas in (value.get("partitions") or {}).items()
        }
        topic_id = value.get("topic_id")
        return cls(partitions, parse_kafka_uuid(topic_id) if topic_id else None)


# -- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------------

LEADER_RECOVERED, LEADER_RECOVERING = 0, 1  # LeaderRecoveryState (KIP-704)
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """LeaderIsrAndControllerEpoch; its znode version is the condition of the next write."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "controller_epoch": self.controller_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != LEADER_RECOVERED:
            value["leader_recovery_state"] = self.leader_recovery_state
        return _encode(value)

    @classmethod
    def decode(cls, data: bytes, what: str = "partition state") -> PartitionState:
        value = _decode(data, what)
        return cls(
            leader=int(_field(value, "leader", what)),
            leader_epoch=int(_field(value, "leader_epoch", what)),
            isr=tuple(int(b) for b in _field(value, "isr", what)),
            controller_epoch=int(_field(value, "controller_epoch", what)),
            leader_recovery_state=int(value.get("leader_recovery_state", LEADER_RECOVERED)),
        )


# -- /config/<type>/<name> and /config/changes/config_change_<seq> -----------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(config)})


def decode_config(data: bytes | None) -> dict[str, str]:
    """An entity's overrides; empty for an empty or absent znode (as Kafka reads it)."""
    if not data:
        return {}
    config = _decode(data, "config").get("config") or {}
    return {str(key): str(value) for key, value in config.items()}


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    """The notification that `/config/<type>/<name>` changed (version 2: an entity path)."""
    return _encode({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    value = _decode(data, CONFIG_CHANGES)
    if value.get("version") != 2:
        raise ZkDataError(f"{CONFIG_CHANGES}: unsupported version in {value!r}")
    entity_type, _, entity_name = str(_field(value, "entity_path", CONFIG_CHANGES)).partition("/")
    return entity_type, entity_name


# -- /isr_change_notification/isr_change_<seq> ---------------------------------------------------


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _encode(
        {
            "version": 1,
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(set(partitions))],
        }
    )


def decode_isr_change(data: bytes) -> set[tuple[str, int]]:
    value = _decode(data, ISR_CHANGE_NOTIFICATION)
    return {(str(e["topic"]), int(e["partition"])) for e in value.get("partitions", ())}


# -- /admin/reassign_partitions (legacy, before the AlterPartitionReassignments API) -----------


def encode_reassignment(assignment: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    return _encode(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(replicas)}
                for (t, p), replicas in sorted(assignment.items())
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    value = _decode(data, REASSIGN_PARTITIONS)
    return {
        (str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
        for e in _field(value, "partitions", REASSIGN_PARTITIONS)
    }


# -- /latest_producer_id_block -----------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids [first, first + size) assigned to one broker (ProducerIdsBlock)."""

    broker_id: int
    first: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    def encode(self) -> bytes:
        return _encode(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(self.first),
                "block_end": str(self.last),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        value = _decode(data, PRODUCER_ID_BLOCK)
        first = int(_field(value, "block_start", PRODUCER_ID_BLOCK))
        last = int(_field(value, "block_end", PRODUCER_ID_BLOCK))
        return cls(int(_field(value, "broker", PRODUCER_ID_BLOCK)), first, last - first + 1)


def next_producer_id_block(current: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block after `current` (the znode's content; None while empty), for `broker_id`."""
    first = 0 if current is None else current.last + 1
    if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
        raise ZkDataError(f"exhausted all producer ids (the last block ends at {first - 1})")
    return ProducerIdBlock(broker_id, first)
