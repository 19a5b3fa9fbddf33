"""A cluster member's `meta.properties`: the log dirs remember the cluster they belong to.

As Kafka's ZooKeeper-era brokers (KafkaServer.startup): each log dir's `meta.properties`
(version 0: broker.id and cluster.id) is written once the broker knows the cluster's id from
`/cluster/id`; a log dir whose stored cluster.id differs stops the broker before it registers
data of another cluster (Kafka's InconsistentClusterIdException, same message).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafkalite.broker.metadata_store import META_PROPERTIES, read_meta_properties
from kafkalite.cluster.zk_client import ZkError
from kafkalite.storage.durable_files import write_atomically


class MetaPropertiesRefused(ZkError):
    """A log dir belongs to another cluster or broker, or its meta.properties is corrupt."""


def _stored(path: Path) -> dict[str, str]:
    try:
        return read_meta_properties(path) if path.exists() else {}
    except ValueError as exc:  # CorruptMetaProperties: one line, never replaced
        raise MetaPropertiesRefused(str(exc)) from None


def check_and_write(log_dirs: Sequence[Path], broker_id: int, cluster_id: str) -> None:
    """Refuse a log dir of another cluster (Kafka's InconsistentClusterIdException) or broker
    (InconsistentBrokerIdException); then write the missing files."""
    for log_dir in log_dirs:
        stored = _stored(log_dir / META_PROPERTIES)
        stored_cluster = stored.get("cluster.id")
        if stored_cluster and stored_cluster != cluster_id:
            raise MetaPropertiesRefused(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId "
                f"Some({stored_cluster}) in meta.properties. The broker is trying to join the "
                "wrong cluster. Configured zookeeper.connect may be wrong."
            )
        stored_broker = stored.get("broker.id", stored.get("node.id"))
        if stored_broker is not None and int(stored_broker) != broker_id:
            raise MetaPropertiesRefused(
                f"Configured broker.id {broker_id} doesn't match stored broker.id "
                f"Some({stored_broker}) in meta.properties. If you moved your data, make sure "
                "your configured broker.id matches. If you intend to create a new broker, you "
                "should remove all data in your data directories (log.dirs)."
            )
    for log_dir in log_dirs:
        path = log_dir / META_PROPERTIES
        if not path.exists():
            log_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(path, f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
