"""The systems a chaos run attacks: kafkalite (one node, or N brokers on a real ZooKeeper) or
Apache Kafka (a KRaft cluster, compat/kafka_cluster.py). Every broker listens on a free port
behind a `TcpProxy`; it advertises the proxy's port, so clients (and brokers fetching from each
other) never bypass the proxies. Every process runs in its own process group.

A node has `node_id`, `process`, `start()`, `stop(sig, timeout)`; the harness signals its
process group for pauses.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from chaos.proxy import TcpProxy
from chaos.security import ChaosSecurity
from kafkalite.testing import free_ports

_STARTED = re.compile(r"kafkalite started: ")
# A broker restarted within the ZooKeeper session timeout of its killed predecessor waits for
# the old registration to go (kafka_zk.register_broker); one whose id another live session
# holds under other endpoints exits, as Kafka does, and is started again until that session
# has expired.
_OLD_SESSION = re.compile(r"is registered by another session")


class Node(Protocol):
    node_id: int
    process: subprocess.Popen | None

    def start(self, timeout: float = ...) -> Any: ...
    def stop(self, sig: int = ..., timeout: float = ...) -> int | None: ...


@dataclass
class KafkaliteNode:
    """`kafkalite serve` in its own process group, output appended to `log_file`."""

    node_id: int
    data_dir: Path
    log_file: Path
    overrides: dict[str, str]
    process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> KafkaliteNode:
        deadline = time.monotonic() + timeout
        while True:
            offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            self._launch()
            output = self._await_started(offset, deadline)
            if _STARTED.search(output):
                return self
            if not (_OLD_SESSION.search(output) and time.monotonic() < deadline):
                break
            time.sleep(0.5)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"kafkalite broker {self.node_id} did not start; see {self.log_file}")

    def _launch(self) -> None:
        cmd = [sys.executable, "-m", "kafkalite", "serve"]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip

    def _await_started(self, offset: int, deadline: float) -> str:
        """The log written since `offset` once the broker started, exited or ran out of time."""
        assert self.process is not None
        while True:  # the harness watches a log, not a test: polling
            with open(self.log_file, "rb") as log:
                log.seek(offset)
                output = log.read().decode(errors="replace")
            if _STARTED.search(output) or time.monotonic() >= deadline:
                return output
            if self.process.poll() is not None:
                with open(self.log_file, "rb") as log:  # the exit message, written before exit
                    log.seek(offset)
                    return log.read().decode(errors="replace")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            signal_group(process, signal.SIGCONT)
            signal_group(process, sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                signal_group(process, signal.SIGKILL)
                process.wait()
        self.process = None
        return process.returncode


def signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


@dataclass
class Target:
    """A started system: its nodes, the proxy in front of each, ZooKeeper if any."""

    name: str
    nodes: Mapping[int, Node]
    proxies: dict[int, TcpProxy]  # in front of each broker's client (and replication) listener
    zookeeper: Any = None
    store: Any = None  # kafkalite.s3_server.S3Server of a tiered run (chaos/tiered.py)
    # More proxies per broker (Kafka's controller listener): a partition cuts them too.
    side_proxies: dict[int, list[TcpProxy]] = field(
        default_factory=dict
    )  # kafkalite.cluster.zookeeper_server.ZooKeeperServer
    _stop: Any = None
    security: ChaosSecurity | None = None  # --secure (chaos/security.py)

    @property
    def bootstrap(self) -> str:
        return ",".join(proxy.address for proxy in self.proxies.values())

    @property
    def admin_config(self) -> dict[str, str]:
        """The harness's librdkafka login (none on PLAINTEXT), without bootstrap.servers."""
        return self.security.admin_config() if self.security else {}

    def client_config_args(self) -> list[str]:
        """chaos.workload's arguments for the workload's login (none on PLAINTEXT)."""
        if self.security is None:
            return []
        return ["--client-config", str(self.security.workload_config_file)]

    def stop(self) -> None:
        try:
            if self._stop is not None:
                self._stop()
            else:
                for node in self.nodes.values():
                    try:
                        node.stop(timeout=30)
                    except Exception:  # keep stopping the others
                        pass
            if self.zookeeper is not None:
                self.zookeeper.stop()
            if self.store is not None:
                self.store.stop()
        finally:
            for proxy in self.all_proxies(None):
                proxy.stop()

    def all_proxies(self, node_id: int | None) -> list[TcpProxy]:
        """The proxies in front of broker `node_id` (None: of every broker)."""
        ids = list(self.proxies) if node_id is None else [node_id]
        return [p for i in ids for p in (self.proxies[i], *self.side_proxies.get(i, []))]


def _proxies(ids: list[int], role: str = "broker") -> tuple[dict[int, TcpProxy], dict[int, int]]:
    """A proxy per node, and the free port each will forward to (the node listens there)."""
    ports = dict(zip(ids, free_ports(len(ids)), strict=True))
    proxies = {i: TcpProxy(f"{role}-{i}", ports[i]).start() for i in ids}
    return proxies, ports


# Short timeouts so a 2-minute run can pause past them (seconds; the schedule's pauses are
# shorter and longer than these). Kafka's names in the overrides.
CHAOS_TIMEOUTS = {"session": 6.0, "replica.lag.time.max": 5.0}

KAFKALITE_CHAOS_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "kafkalite.metrics.port": "-1",
}


def start_kafkalite(
    run_dir: Path,
    brokers: int,
    overrides: Mapping[str, str] | None = None,
    data_dirs: Mapping[int, Path] | None = None,
    tiered: bool = False,
    security: ChaosSecurity | None = None,
) -> Target:
    """kafkalite: one node without ZooKeeper, or `brokers` on a real ZooKeeper; tiered: with
    an S3 server (chaos/tiered.py) the brokers tier to; security: on SASL_SSL with ACLs."""
    ids = list(range(1, brokers + 1))
    proxies, ports = _proxies(ids)
    nodes: dict[int, Node] = {}
    target = Target("kafkalite", nodes, proxies)
    protocol = "PLAINTEXT"
    try:
        common = {**KAFKALITE_CHAOS_OVERRIDES, **(overrides or {})}
        if security is not None:
            protocol = "SASL_SSL"
            common.update(security.broker_overrides())
            target.security = security
        if tiered:
            from chaos import tiered as tier

            target.store = tier.start_store(run_dir)
            common.update(tier.broker_overrides(target.store))
        if brokers > 1:
            from kafkalite.cluster.zookeeper_server import ZooKeeperServer

            target.zookeeper = ZooKeeperServer(run_dir / "zookeeper").start()
            common["zookeeper.connect"] = target.zookeeper.connect_string
            common.setdefault("offsets.topic.replication.factor", str(min(3, brokers)))
            common.setdefault("transaction.state.log.replication.factor", str(min(3, brokers)))
            common.setdefault("transaction.state.log.min.isr", str(min(2, brokers)))
            common.setdefault("default.replication.factor", str(min(3, brokers)))
            common.setdefault("min.insync.replicas", str(min(2, brokers)))
        for i in ids:
            data = (data_dirs or {}).get(i, run_dir) / f"broker-{i}-data"
            node = KafkaliteNode(
                i, data, run_dir / "logs" / f"broker-{i}.log",
                {
                    "broker.id": str(i),
                    "listeners": f"{protocol}://127.0.0.1:{ports[i]}",
                    "advertised.listeners": f"{protocol}://127.0.0.1:{proxies[i].port}",
                    "log.dirs": str(data),
                    **common,
                },
            )  # fmt: skip
            nodes[i] = node
            node.start()
    except BaseException:
        target.stop()
        raise
    return target


KAFKA_CHAOS_OVERRIDES = {
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "5000",
}


def start_kafka(run_dir: Path, brokers: int, overrides: Mapping[str, str] | None = None) -> Target:
    from compat.kafka_cluster import KafkaCluster

    ids = list(range(1, brokers + 1))
    proxies, ports = _proxies(ids)
    # The KRaft quorum's traffic goes through proxies too, so a partition cuts it.
    controller_proxies, controller_ports = _proxies(ids, "controller")
    settings = {**KAFKA_CHAOS_OVERRIDES, **(overrides or {})}
    if brokers < 3:
        settings.update({
            "offsets.topic.replication.factor": str(brokers),
            "transaction.state.log.replication.factor": str(brokers),
            "transaction.state.log.min.isr": "1", "min.insync.replicas": "1",
            "default.replication.factor": str(brokers),
        })  # fmt: skip
    cluster = KafkaCluster(
        run_dir / "kafka", brokers, settings,
        advertised_ports={i: p.port for i, p in proxies.items()}, ports=ports,
        controller_ports=controller_ports,
        voter_ports={i: p.port for i, p in controller_proxies.items()},
    )  # fmt: skip
    nodes = {n.node_id: n for n in cluster.nodes}
    side = {i: [proxy] for i, proxy in controller_proxies.items()}
    target = Target("kafka", nodes, proxies, side_proxies=side, _stop=cluster.stop)
    try:
        cluster.start()
    except BaseException:
        target.stop()
        raise
    return target
