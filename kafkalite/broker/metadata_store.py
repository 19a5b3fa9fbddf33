"""Durable cluster metadata of a single-node broker: cluster id, topics, producer id block.

Kafka keeps this in KRaft's `__cluster_metadata` (or ZooKeeper); a single node keeps it in
`meta.properties` (Kafka's own file) and `kafkalite-metadata.json` in the log dir, written
atomically. The ZooKeeper-backed store of the cluster issue replaces this class.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafkalite.storage.leader_epoch import write_atomically

METADATA_FILE = "kafkalite-metadata.json"
META_PROPERTIES = "meta.properties"


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)


def new_cluster_id() -> str:
    """22-character URL-safe base64 of a random UUID, like `kafka-storage random-uuid`."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MetadataStore:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.topics: dict[str, TopicMetadata] = {}
        self.next_producer_id = 0
        self.cluster_id = ""

    def load(self, node_id: int, configured_cluster_id: str | None) -> None:
        """Read or create meta.properties and the topic table; check the node and cluster ids."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_meta_properties(node_id, configured_cluster_id)
        path = self.log_dir / METADATA_FILE
        if not path.exists():
            return
        data = json.loads(path.read_text(encoding="utf-8"))
        self.next_producer_id = data.get("next_producer_id", 0)
        for raw in data.get("topics", []):
            topic = TopicMetadata(**{**raw, "topic_id": uuid.UUID(raw["topic_id"])})
            self.topics[topic.name] = topic

    def _load_meta_properties(self, node_id: int, configured: str | None) -> str:
        path = self.log_dir / META_PROPERTIES
        props: dict[str, str] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    props[key.strip()] = value.strip()
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
            {**asdict(topic), "topic_id": str(topic.topic_id)} for topic in self.topics.values()
        ]
        data = {"next_producer_id": self.next_producer_id, "topics": topics}
        write_atomically(self.log_dir / METADATA_FILE, json.dumps(data, indent=1))

    def allocate_producer_id(self) -> int:
        """A fresh producer id; persisted before use so a restart never hands it out again."""
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        self.save()
        return producer_id
