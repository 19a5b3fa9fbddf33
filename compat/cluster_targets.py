"""The 3-broker clusters the differential cluster suite (compat/test_cluster_diff.py) runs
against: kafkalite (`kafkalite serve` x3 on a real ZooKeeper, kafkalite/cluster/
zookeeper_server.py) and Apache Kafka (3 KRaft nodes, compat/kafka_cluster.py).

    with running_cluster("kafkalite", tmp_dir) as cluster:
        cluster.bootstrap, cluster.bootstrap_of(2), cluster.port_of(2)
        cluster.kill(2); cluster.start(2)       # SIGKILL, then the same id, dir and port

Broker ids are 1..3 on both; each broker keeps its port across restarts (free ports chosen
up front), so clients reconnect to the same address. Both get `CLUSTER_COMMON` plus the
timeouts under their own names: a dead broker leaves the cluster after a 6 s session
(kafkalite's `zookeeper.session.timeout.ms`, Kafka's `broker.session.timeout.ms`) and a
follower that stops fetching leaves the ISR after `replica.lag.time.max.ms` 5 s, so failure
scenarios take seconds, not Kafka's default 18-30 s.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.targets import KafkaliteNode
from kafkalite.testing import free_ports

CLUSTER_TARGETS = ("kafkalite", "kafka")
BROKER_IDS = (1, 2, 3)
SESSION_TIMEOUT_MS = 6000

CLUSTER_COMMON: dict[str, str] = {
    "replica.lag.time.max.ms": "5000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    # A metadata request must never bring a deleted topic back.
    "auto.create.topics.enable": "false",
}
KAFKALITE_CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "kafkalite.metrics.port": "-1",
}
KAFKA_CLUSTER_OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "1000",
}


@dataclass
class Cluster:
    """A running 3-broker cluster: `nodes` by broker id, each with `start()` and `stop(sig)`
    and a `process` (None while stopped)."""

    name: str  # one of CLUSTER_TARGETS
    nodes: Mapping[int, Any]
    ports: Mapping[int, int]
    _stop: Callable[[], None]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.bootstrap_of(i) for i in self.nodes)

    def bootstrap_of(self, *broker_ids: int) -> str:
        return ",".join(f"127.0.0.1:{self.ports[i]}" for i in broker_ids)

    def port_of(self, broker_id: int) -> int:
        return self.ports[broker_id]

    def survivors(self, *dead: int) -> str:
        """The bootstrap of every broker but `dead`."""
        return self.bootstrap_of(*(i for i in self.nodes if i not in dead))

    def running(self, broker_id: int) -> bool:
        process = self.nodes[broker_id].process
        return process is not None and process.poll() is None

    def kill(self, broker_id: int) -> None:
        self.nodes[broker_id].stop(signal.SIGKILL)

    def start(self, broker_id: int) -> None:
        """Start a stopped broker again on its id, data dir and port."""
        self.nodes[broker_id].start(timeout=120.0)

    def start_stopped(self) -> None:
        for broker_id in self.nodes:
            if not self.running(broker_id):
                self.nodes[broker_id].stop(signal.SIGKILL)  # reap an exited one
                self.start(broker_id)

    def stop(self) -> None:
        self._stop()


def start_kafkalite(data_dir: Path, overrides: Mapping[str, str]) -> Cluster:
    from kafkalite.cluster.zookeeper_server import ZooKeeperServer

    zookeeper = ZooKeeperServer(data_dir / "zookeeper")
    ports = dict(zip(BROKER_IDS, free_ports(len(BROKER_IDS)), strict=True))
    nodes: dict[int, KafkaliteNode] = {}

    def stop() -> None:
        for node in nodes.values():
            with contextlib.suppress(Exception):  # keep stopping the others
                node.stop(timeout=30)
        zookeeper.stop()

    try:
        zookeeper.start()
        (data_dir / "logs").mkdir(parents=True, exist_ok=True)
        for broker_id in BROKER_IDS:
            settings = {
                "broker.id": str(broker_id),
                "listeners": f"PLAINTEXT://127.0.0.1:{ports[broker_id]}",
                "log.dirs": str(data_dir / f"broker-{broker_id}"),
                "zookeeper.connect": zookeeper.connect_string,
                **overrides,
            }
            log = data_dir / "logs" / f"broker-{broker_id}.log"
            nodes[broker_id] = KafkaliteNode(
                broker_id, data_dir / f"broker-{broker_id}", log, settings
            )
            nodes[broker_id].start(timeout=120.0)
    except BaseException:
        stop()
        raise
    return Cluster("kafkalite", nodes, ports, stop)


def start_kafka(data_dir: Path, overrides: Mapping[str, str]) -> Cluster:
    from compat.kafka_cluster import KafkaCluster

    cluster = KafkaCluster(data_dir / "kafka", len(BROKER_IDS), overrides)
    cluster.start(timeout=240.0)
    nodes = {node.node_id: node for node in cluster.nodes}
    return Cluster("kafka", nodes, {i: n.port for i, n in nodes.items()}, cluster.stop)


def start_cluster(name: str, data_dir: Path, overrides: Mapping[str, str] | None = None) -> Cluster:
    """`overrides` (properties both understand) go to every broker after the defaults."""
    if name == "kafkalite":
        settings = {**CLUSTER_COMMON, **KAFKALITE_CLUSTER_OVERRIDES, **(overrides or {})}
        return start_kafkalite(data_dir, settings)
    if name == "kafka":
        return start_kafka(
            data_dir, {**CLUSTER_COMMON, **KAFKA_CLUSTER_OVERRIDES, **(overrides or {})}
        )
    raise ValueError(f"unknown cluster target {name!r} (expected one of {CLUSTER_TARGETS})")


@contextlib.contextmanager
def running_cluster(
    name: str, data_dir: Path, overrides: Mapping[str, str] | None = None
) -> Iterator[Cluster]:
    cluster = start_cluster(name, Path(data_dir), overrides)
    try:
        yield cluster
    finally:
        cluster.stop()
