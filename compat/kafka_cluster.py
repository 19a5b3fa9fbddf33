"""A 3-node (or N-node) Apache Kafka cluster in KRaft mode on this machine, for side-by-side
cluster tests, chaos runs (chaos/) and benchmarks.

Every node is broker and controller (`process.roles=broker,controller`), the controller quorum
is static (`controller.quorum.voters`, all N nodes), ports are free ones on 127.0.0.1, node ids
are 1..N and each node has its own dir `<data_dir>/node-<id>` (server.properties, server.log,
kafka.out, kraft-logs/). The pieces are compat/kafka_server.py's (jars from Maven Central via
compat/kafka_dist.py, the log4j2 config, JVM options); here each node runs in its own process
group so a harness can signal it (SIGSTOP/SIGCONT/SIGKILL) without touching anything else.

`advertised_ports` (node id -> port) makes each node advertise another port on 127.0.0.1, e.g.
a proxy in front of it; inter-broker traffic follows the advertised address too.
`ports` and `controller_ports` fix the ports the nodes listen on, and `voter_ports` the
controller addresses the quorum uses (a proxy in front of each controller listener).

    python -m compat.kafka_cluster [--nodes 3] [--data-dir DIR] [--override key=value]...

starts one in the foreground, prints its bootstrap and runs until Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from compat.kafka_dist import CompatSetupError
from compat.kafka_server import _LOG4J2, KafkaServer, random_cluster_id, write_properties
from kafkalite.testing import free_ports

# A replicated cluster with Kafka's durability settings; `overrides` win.
CLUSTER_DEFAULTS: dict[str, str] = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
}
NODE_JVM_OPTS = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
)


class KafkaClusterNode(KafkaServer):
    """One member of a `KafkaCluster` (a KafkaServer whose quorum is the whole cluster)."""

    def __init__(self, cluster: KafkaCluster, node_id: int, port: int, controller_port: int):
        super().__init__(cluster.data_dir / f"node-{node_id}", cluster.overrides)
        self.cluster = cluster
        self.node_id = node_id
        self.port = port
        self.controller_port = controller_port
        self.advertised_port = cluster.advertised_ports.get(node_id, port)

    def properties(self) -> dict[str, str]:
        host = self.host
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://{host}:{self.port},CONTROLLER://{host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{self.advertised_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.voters": self.cluster.voters,
            "log.dirs": str(self.log_dir),
            **CLUSTER_DEFAULTS,
            **self.overrides,
        }

    def format(self) -> KafkaClusterNode:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.properties_file, self.properties())
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        if (self.log_dir / "meta.properties").is_file():
            return self
        cmd = self._java(
            "kafka.tools.StorageTool", "format", "--cluster-id", self.cluster.cluster_id,
            "--config", str(self.properties_file), heap=("-Xmx256m", "-XX:TieredStopAtLevel=1"),
        )  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()[-3000:]
            raise CompatSetupError(
                f"kafka-storage format failed (exit {result.returncode}):\n{output}"
            )
        return self

    def launch(self) -> None:
        """Start the process (its own process group) without waiting for it."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"Kafka node {self.node_id} is already running")
        self.format()
        cmd = self._java("kafka.Kafka", str(self.properties_file), heap=NODE_JVM_OPTS)
        with open(self.data_dir / "kafka.out", "ab") as out:
            self.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self, timeout: float = 120.0) -> None:
        try:
            self._wait_ready(time.monotonic() + timeout)
        except BaseException:
            self.stop(timeout=10)
            raise

    def start(self, timeout: float = 120.0) -> KafkaClusterNode:
        self.launch()
        self.wait_ready(timeout)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        process = self.process
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGCONT)  # a paused node could not act on SIGTERM
        return super().stop(sig, timeout)


class KafkaCluster:
    def __init__(
        self,
        data_dir: Path,
        nodes: int = 3,
        overrides: Mapping[str, str] | None = None,
        advertised_ports: Mapping[int, int] | None = None,
        ports: Mapping[int, int] | None = None,
        controller_ports: Mapping[int, int] | None = None,
        voter_ports: Mapping[int, int] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.advertised_ports = dict(advertised_ports or {})
        self.cluster_id = random_cluster_id()
        chosen = free_ports(2 * nodes)
        self.nodes = [
            KafkaClusterNode(
                self,
                i,
                (ports or {}).get(i, chosen[2 * i - 2]),
                (controller_ports or {}).get(i, chosen[2 * i - 1]),
            )
            for i in range(1, nodes + 1)
        ]
        self.voters = ",".join(
            f"{n.node_id}@{n.host}:{(voter_ports or {}).get(n.node_id, n.controller_port)}"
            for n in self.nodes
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.advertised_port}" for n in self.nodes)

    def start(self, timeout: float = 180.0) -> KafkaCluster:
        try:
            for node in self.nodes:
                node.format()
            for node in self.nodes:  # the quorum forms once a majority runs
                node.launch()
            for node in self.nodes:
                node.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to every node at once (the last one alone would wait for a quorum that has
        gone), then wait for each; SIGKILL whatever is left after `timeout`."""
        running = [n.process for n in self.nodes if n.process and n.process.poll() is None]
        for process in running:
            os.killpg(process.pid, signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            try:
                node.stop(timeout=max(deadline - time.monotonic(), 0.1))
            except Exception:  # keep stopping the others
                pass

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat.kafka_cluster",
        description="Run an Apache Kafka KRaft cluster in the foreground; print its bootstrap.",
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--data-dir", help="data directory (default: a temporary one)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--override {item!r} is not key=value")
        overrides[key.strip()] = value.strip()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with tempfile.TemporaryDirectory(prefix="kafka-cluster-") as tmp:
        cluster = KafkaCluster(Path(args.data_dir or tmp), args.nodes, overrides)
        try:
            cluster.start()
        except CompatSetupError as exc:
            print(f"compat: {exc}", file=sys.stderr)
            return 2
        try:
            print(cluster.bootstrap, flush=True)
            print(f"Apache Kafka cluster of {args.nodes} ready (Ctrl-C stops it)", file=sys.stderr)
            while not stop:
                time.sleep(0.2)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
