"""`kafkalite cluster --brokers N`: a local cluster, a real ZooKeeper and N brokers.

The brokers replicate as Kafka's do: every partition has a leader and followers that fetch
from it, an ISR the leader shrinks and expands through the controller, acks=all answered once
the ISR has the records, and a new leader elected from the ISR when a broker goes.

Under `--data-dir` (default `data/cluster`): `zookeeper/` (the server's data and logs), and
per broker `broker-<id>/` (its log dir) and `broker-<id>.out` (its output). ZooKeeper comes
from Maven Central on first use (kafkalite.cluster.zookeeper_server) and keeps its port across
runs on the same data dir; brokers listen on free ports (or `--port P`, P+1, ...), and serve
Prometheus metrics on free ports too (or `--override kafkalite.metrics.port=M`: M, M+1, ...;
-1: none), each printed with its broker. Broker ids are 1..N. `--override key=value` goes to
every broker. A broker that exits is reported within a second, and the others keep running.
Ctrl-C or SIGTERM stops the brokers (SIGTERM: a clean shutdown), then ZooKeeper.

`--tiered` also starts a local S3 server (gofakes3, kafkalite/s3_server.py; its buckets in
`s3/`, its port kept across runs on the same data dir) and turns tiered storage on in every
broker (remote.log.storage.system.enable and the rsm.config.* settings for it): topics
created with `remote.storage.enable=true` upload their closed segments there, the remote
segment lists replicated through `__remote_log_metadata`.

`--secure` generates a CA, a broker certificate and passwords under `security/`
(kafkalite/cluster/cluster_security.py): brokers listen on SASL_SSL only, log in to each other
over it as the super user `broker`, authorize with ACLs, and the super user `admin`'s client
settings are printed (a confluent-kafka dict, and a properties file for `--command-config`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.cluster.cluster_security import ADMIN_USER, ClusterSecurity, generate
from kafkalite.cluster.zookeeper_server import ZooKeeperServer, stop_signals, wait_for
from kafkalite.maven_dist import ProvisionError
from kafkalite.process import BrokerProcess, stop_all
from kafkalite.s3_server import S3Server

# Set per broker by the launcher; an --override of one would break the cluster.
LAUNCHER_PROPERTIES = frozenset(
    {"broker.id", "node.id", "listeners", "log.dir", "log.dirs", "zookeeper.connect"}
)


@dataclass
class LocalCluster:
    data_dir: Path
    broker_count: int
    overrides: Mapping[str, str] = field(default_factory=dict)
    first_port: int = 0  # 0: free ports
    zookeeper: ZooKeeperServer | None = None
    s3: S3Server | None = None  # --tiered: the store the brokers tier to
    security: ClusterSecurity | None = None  # --secure: SASL_SSL, ACLs, generated users
    brokers: list[BrokerProcess] = field(default_factory=list)
    _reported: set[str] = field(default_factory=set)

    @property
    def bootstrap(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers)

    def broker_overrides(self, broker_id: int, zookeeper_connect: str) -> dict[str, str]:
        port = self.first_port + broker_id - 1 if self.first_port else 0
        protocol = "PLAINTEXT" if self.security is None else "SASL_SSL"
        return {
            "broker.id": str(broker_id),
            "listeners": f"{protocol}://127.0.0.1:{port}",
            "zookeeper.connect": zookeeper_connect,
            # Kafka's default, 3, cannot be met by fewer brokers.
            "offsets.topic.replication.factor": str(min(3, self.broker_count)),
            **self._tiered_overrides(),
            **(self.security.broker_properties() if self.security else {}),
            **self.overrides,
            "kafkalite.metrics.port": self._metrics_port(broker_id),
        }

    def _tiered_overrides(self) -> dict[str, str]:
        if self.s3 is None:
            return {}
        replicas = str(min(3, self.broker_count))
        return {
            **self.s3.broker_properties(),
            "rlmm.config.remote.log.metadata.topic.replication.factor": replicas,
        }

    def _metrics_port(self, broker_id: int) -> str:
        """A free port (0), or the overridden one plus the broker's rank (one port can serve
        only one broker); -1 (off) or a bad value as given (the broker refuses the latter)."""
        given = self.overrides.get("kafkalite.metrics.port", "0")
        try:
            first = int(given)
        except ValueError:
            return given
        return str(first + broker_id - 1) if first > 0 else given

    def start_broker(self, broker_id: int, broker: BrokerProcess) -> None:
        """Start one broker; a broker that cannot start names itself and says why."""
        try:
            broker.start()
        except RuntimeError as exc:
            reason = str(exc).splitlines()[0].rstrip(":")
            said = [line.strip() for line in broker.lines if line.strip()]
            last = f": {said[-1]}" if said else ""
            raise RuntimeError(f"broker {broker_id}: {reason}{last}") from None

    def start(self) -> LocalCluster:
        try:
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper").start()
            if self.s3 is not None:
                self.s3.start()
            for broker_id in range(1, self.broker_count + 1):
                broker = BrokerProcess(
                    self.data_dir / f"broker-{broker_id}",
                    self.broker_overrides(broker_id, self.zookeeper.connect_string),
                    output_file=self.data_dir / f"broker-{broker_id}.out",
                )
                self.brokers.append(broker)
                self.start_broker(broker_id, broker)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            stop_all(self.brokers)
        finally:
            if self.zookeeper is not None:
                self.zookeeper.stop()
            if self.s3 is not None:
                self.s3.stop()

    def members(self) -> dict[str, subprocess.Popen | None]:
        members: dict[str, subprocess.Popen | None] = {
            f"broker {i}": b.process for i, b in enumerate(self.brokers, 1)
        }
        members["zookeeper"] = self.zookeeper.process if self.zookeeper else None
        if self.s3 is not None:
            members["s3 server"] = self.s3.process
        return members

    def report_exits(self) -> bool:
        """Print each member that exited since the last call (a killed broker is a failure
        test, not the end of the cluster); whether any member still runs."""
        alive = False
        for name, process in self.members().items():
            code = None if process is None else process.poll()
            if process is not None and code is None:
                alive = True
            elif name not in self._reported:
                self._reported.add(name)
                print(f"kafkalite cluster: {name} exited (code {code})", flush=True)
        return alive

    def describe(self) -> str:
        assert self.zookeeper is not None
        lines = [f"kafkalite cluster, data in {self.data_dir}"]
        lines.append(f"  zookeeper.connect={self.zookeeper.connect_string}")
        if self.s3 is not None:
            lines.append(f"  s3: {self.s3.endpoint_url}, bucket {self.s3.bucket} (tiered storage)")
        for i, broker in enumerate(self.brokers, 1):
            metrics = f", metrics {broker.metrics_url}" if broker.metrics_url else ""
            lines.append(f"  broker {i}: {broker.bootstrap}{metrics}")
        urls = [b.metrics_url for b in self.brokers if b.metrics_url]
        if urls:
            lines.append(f"metrics={','.join(urls)}")
        lines.append(f"bootstrap.servers={self.bootstrap}")
        if self.security is not None:
            lines += self._client_settings(self.security)
        return "\n".join(lines)

    def _client_settings(self, security: ClusterSecurity) -> list[str]:
        config = json.dumps(security.client_config(self.bootstrap))
        properties = security.write_client_properties(self.bootstrap)
        return [
            f"client settings (SASL_SSL, user {ADMIN_USER}, CA {security.ca_file}):",
            f"  confluent-kafka: {config}",
            f"  Kafka tools: --command-config {properties}",
        ]


def s3_server(data_dir: Path) -> S3Server:
    """The --tiered store: its buckets under the cluster's data dir, on the port it had
    there before (the brokers' logs name that endpoint in their remote metadata)."""
    port_file = data_dir / "s3" / "port"
    port = int(port_file.read_text()) if port_file.exists() else 0
    server = S3Server(data_dir / "s3" / "data", port)
    port_file.parent.mkdir(parents=True, exist_ok=True)
    port_file.write_text(str(server.port))
    return server


def run(
    broker_count: int,
    data_dir: Path,
    overrides: Mapping[str, str],
    first_port: int = 0,
    tiered: bool = False,
    secure: bool = False,
) -> int:
    """Start the cluster, print where it is, and run until Ctrl-C/SIGTERM (exit 0; a member
    that exits is reported and the others keep running) or until no member is left (exit 1).
    Provisioning or start failures: one line, exit 2."""
    cluster = LocalCluster(data_dir, broker_count, overrides, first_port)
    if tiered:
        cluster.s3 = s3_server(data_dir)
    if secure:
        cluster.security = generate(data_dir)
    with stop_signals() as stop:
        try:
            cluster.start()
        except (ProvisionError, RuntimeError, OSError) as exc:
            first_line = (str(exc).strip() or repr(exc)).splitlines()[0]
            sys.stderr.write(f"kafkalite: cannot start the cluster: {first_line}\n")
            return 2
        try:
            print(cluster.describe(), flush=True)
            wait_for(stop, cluster.report_exits)
            left = stop.is_set() or cluster.report_exits()  # Ctrl-C also reached the brokers
        finally:
            cluster.stop()
    print("kafkalite cluster stopped", flush=True)
    return 0 if left else 1
