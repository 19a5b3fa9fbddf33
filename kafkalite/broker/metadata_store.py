"""`SingleNodeMetadata`: the cluster metadata of a broker that is the whole cluster.

One implementation of broker/cluster_metadata.py's `ClusterMetadata` (the other is the
ZooKeeper store). Kafka keeps this in KRaft's `__cluster_metadata` (or ZooKeeper); a single
node keeps cluster id, topics and the next producer id in `meta.properties` (Kafka's own
file) and `kafkalite-metadata.json` in the log dir, written atomically. This node is the only
broker, the controller, and the leader and only replica of every partition; changes take
effect at once and are announced to the listeners before the write returns.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from kafkalite.broker.client_quotas import Entity, decode_entity, encode_entity
from kafkalite.broker.cluster_metadata import (
    Assignment,
    BrokerInfo,
    MetadataListener,
    TopicMetadata,
)
from kafkalite.broker.partition import PartitionState
from kafkalite.storage.durable_files import write_atomically

METADATA_FILE = "kafkalite-metadata.json"
META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    """22-character URL-safe base64 of a random UUID, like `kafka-storage random-uuid`."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class CorruptMetaProperties(ValueError):
    """meta.properties exists but is not one Kafka (or kafkalite) wrote: never replace it."""


def read_meta_properties(path: Path) -> dict[str, str]:
    """Parse meta.properties strictly, as Kafka's MetaProperties: version 0 needs broker.id,
    version 1 node.id and cluster.id. A damaged file stops the broker rather than being
    replaced by a fresh identity, so a wrong or broken disk is never adopted silently."""

    def corrupt(why: str) -> CorruptMetaProperties:
        return CorruptMetaProperties(
            f"{path} is corrupt ({why}); refusing to start: restore the file, or remove it "
            "to adopt this directory with a new identity"
        )

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise corrupt(f"byte {exc.start} is not UTF-8") from None
    props: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            raise corrupt(f"line {number} is not key=value")
        props[key.strip()] = value.strip()
    version = props.get("version")
    required = {"0": ("broker.id",), "1": ("node.id", "cluster.id")}.get(version or "")
    if required is None:
        raise corrupt(f"version {version!r} is not 0 or 1")
    for key in required:
        if not props.get(key):
            raise corrupt(f"{key} is missing")
    node = props.get("node.id", props.get("broker.id"))
    if node is not None and not node.lstrip("-").isdigit():
        raise corrupt(f"node id {node!r} is not a number")
    return props


class SingleNodeMetadata:
    def __init__(self, log_dir: Path, local_broker: BrokerInfo) -> None:
        self.log_dir = log_dir
        self.local_broker = local_broker
        self._topics: dict[str, TopicMetadata] = {}
        self._listeners: list[MetadataListener] = []
        self.next_producer_id = 0
        self.cluster_id = ""
        # user -> SCRAM mechanism -> credential text (broker/scram_credentials.py)
        self._scram: dict[str, dict[str, str]] = {}
        # quota entity -> quota key -> value (broker/client_quotas.py)
        self._client_quotas: dict[Entity, dict[str, float]] = {}
        # group id -> its group configs (broker/group_configs.py)
        self._group_configs: dict[str, dict[str, str]] = {}
        # ISR changes a leader made (in memory: a single node's ISR is itself after a restart).
        self._isr: dict[tuple[str, int], tuple[tuple[int, ...], int]] = {}

    @property
    def node_id(self) -> int:
        return self.local_broker.broker_id

    def load(self, node_id: int, configured_cluster_id: str | None) -> None:
        """Read or create meta.properties and the topic table; check the node and cluster ids."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_meta_properties(node_id, configured_cluster_id)
        path = self.log_dir / METADATA_FILE
        if not path.exists():
            return
        data = json.loads(path.read_text(encoding="utf-8"))
        self.next_producer_id = data.get("next_producer_id", 0)
        self._scram = data.get("scram_credentials", {})
        self._group_configs = data.get("group_configs", {})
        self._client_quotas = {
            decode_entity(raw["entity"]): raw["quotas"] for raw in data.get("client_quotas", [])
        }
        for raw in data.get("topics", []):
            topic = TopicMetadata(**{**raw, "topic_id": uuid.UUID(raw["topic_id"])})
            self._topics[topic.name] = topic

    def _load_meta_properties(self, node_id: int, configured: str | None) -> str:
        path = self.log_dir / META_PROPERTIES
        props = read_meta_properties(path) if path.exists() else {}
        stored_node = props.get("node.id", props.get("broker.id"))
        if stored_node is not None and int(stored_node) != node_id:
            raise ValueError(
                f"{path} belongs to node.id {stored_node}, but this broker is {node_id}"
            )
        stored_cluster = props.get("cluster.id")
        if stored_cluster and configured and stored_cluster != configured:
            raise ValueError(f"{path} belongs to cluster {stored_cluster}, not {configured}")
        cluster_id = stored_cluster or configured or new_cluster_id()
        if not stored_cluster:
            write_atomically(
                path, f"#kafkalite\nversion=1\nnode.id={node_id}\ncluster.id={cluster_id}\n"
            )
        return cluster_id

    def save(self) -> None:
        topics = [
            {**asdict(topic), "topic_id": str(topic.topic_id)} for topic in self._topics.values()
        ]
        data = {
            "next_producer_id": self.next_producer_id,
            "topics": topics,
            "scram_credentials": self._scram,
            "group_configs": self._group_configs,
            "client_quotas": [
                {"entity": encode_entity(entity), "quotas": quotas}
                for entity, quotas in self._client_quotas.items()
            ],
        }
        write_atomically(self.log_dir / METADATA_FILE, json.dumps(data, indent=1))

    def scram_credentials(self) -> Mapping[str, Mapping[str, str]]:
        return self._scram

    def set_scram_credentials(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        for user, credentials in changes.items():
            if credentials:
                self._scram[user] = dict(credentials)
            else:
                self._scram.pop(user, None)
        self.save()

    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        return self._client_quotas

    def set_client_quotas(self, changes: Mapping[Entity, Mapping[str, float]]) -> None:
        for entity, quotas in changes.items():
            if quotas:
                self._client_quotas[entity] = dict(quotas)
            else:
                self._client_quotas.pop(entity, None)
        self.save()

    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._group_configs

    def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        if configs:
            self._group_configs[group_id] = dict(configs)
        else:
            self._group_configs.pop(group_id, None)
        self.save()

    def allocate_producer_id(self) -> int:
        """A fresh producer id; persisted before use so a restart never hands it out again."""
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        self.save()
        return producer_id

    def subscribe(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    # -- reads -----------------------------------------------------------------------------

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        meta = self._topics.get(topic)
        if meta is None or not 0 <= partition < meta.num_partitions:
            return None
        me = (self.node_id,)
        isr, partition_epoch = self._isr.get((topic, partition), (me, 0))
        # Nothing ever moves leadership here, so the leader epoch stays 0.
        return PartitionState(topic, partition, me, self.node_id, 0, isr, partition_epoch)

    def partition_states(self, topic: str) -> list[PartitionState]:
        meta = self._topics.get(topic)
        count = meta.num_partitions if meta is not None else 0
        return [state for i in range(count) if (state := self.partition_state(topic, i))]

    def brokers(self) -> list[BrokerInfo]:
        return [self.local_broker]

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.local_broker if broker_id == self.node_id else None

    def controller_id(self) -> int:
        return self.node_id

    # -- writes ----------------------------------------------------------------------------

    def create_topic(self, topic: TopicMetadata, assignment: Assignment) -> None:
        self._check_assignment(assignment)
        self._topics[topic.name] = topic
        self.save()
        self._announce_partitions(topic, range(topic.num_partitions))

    def add_partitions(self, name: str, assignment: Assignment) -> None:
        self._check_assignment(assignment)
        topic = self._topics[name]
        first = topic.num_partitions
        topic.num_partitions += len(assignment)
        self.save()
        self._announce_partitions(topic, range(first, topic.num_partitions))

    def delete_topic(self, name: str) -> None:
        del self._topics[name]
        self.save()
        for listener in self._listeners:
            listener.on_topic_deleted(name)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._topics[name].configs = dict(configs)
        self.save()
        for listener in self._listeners:
            listener.on_topic_configs_changed(name, configs)

    def alter_isr(
        self,
        topic: str,
        partition: int,
        new_isr: Sequence[int],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        """Applied at once when `partition_epoch` is current; the resulting state announced."""
        state = self.partition_state(topic, partition)
        if state is None:
            return
        if partition_epoch == state.partition_epoch and leader_epoch == state.leader_epoch:
            self._isr[(topic, partition)] = (tuple(new_isr), partition_epoch + 1)
            state = self.partition_state(topic, partition)
            assert state is not None
        for listener in self._listeners:
            listener.on_partition_state_changed(self._topics[topic], state)

    async def wait_for_partitions(self, names: Sequence[str], timeout_s: float) -> bool:
        return True  # created at once

    async def catch_up(self, names: Sequence[str]) -> None:
        return None  # this cache is the source of truth

    def _check_assignment(self, assignment: Assignment) -> None:
        if any(list(replicas) != [self.node_id] for replicas in assignment):
            raise ValueError(f"a single node can only assign broker {self.node_id}")

    def _announce_partitions(self, topic: TopicMetadata, indexes: range) -> None:
        for index in indexes:
            state = self.partition_state(topic.name, index)
            assert state is not None
            for listener in self._listeners:
                listener.on_partition_state_changed(topic, state)
