"""`kafkalite cluster --brokers N`: a real ZooKeeper and N broker processes, each serving
metrics on a free port, each member's exit reported at once, a broker that cannot start
named with its reason, everything stopped on SIGTERM, ZooKeeper's port kept across runs;
`--secure`: SASL_SSL only, with the admin's printed settings."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster.launcher import LocalCluster, s3_server
from kafkalite.cluster.zookeeper_server import four_letter_word, parse_srvr
from kafkalite.process import BrokerProcess
from kafkalite.tools.command_config import read_command_config
from tests.integration.metrics_helpers import get

pytestmark = pytest.mark.slow
TIMEOUT = 90


class Launcher:
    def __init__(self, data_dir: Path, brokers: int, *args: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafkalite",
                "cluster",
                "--brokers",
                str(brokers),
                "--data-dir",
                str(data_dir),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def read_until(self, prefix: str) -> list[str]:
        seen = []
        while True:
            line = self.lines.get(timeout=TIMEOUT)
            seen.append(line)
            if line.startswith(prefix):
                return seen

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _value(lines: list[str], key: str) -> str:
    [value] = [line.split("=", 1)[1] for line in lines if line.strip().startswith(f"{key}=")]
    return value


def _refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        four_letter_word(host, int(port), "ruok", timeout=5)
    except ConnectionRefusedError:
        return True
    return False


def _broker_pids(data_dir: Path) -> dict[int, int]:
    """The running `kafkalite serve` processes of this data dir, by broker id."""
    log_dirs = re.compile(rf"log\.dirs={re.escape(str(data_dir))}/broker-(\d+)")
    pids = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        matches = [log_dirs.fullmatch(arg) for arg in args]
        for match in filter(None, matches):
            pids[int(match.group(1))] = int(proc.name)
    return pids


def _leftovers(data_dir: Path) -> list[int]:
    """Processes whose command line names the data dir (none once the launcher stopped)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if str(data_dir).encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    data_dir = tmp_path / "cluster"
    try:
        yield data_dir
    finally:
        for pid in _leftovers(data_dir):  # only if the launcher failed to stop them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_cluster_starts_reports_a_dead_broker_and_stops(cluster_dir: Path) -> None:
    launcher = Launcher(cluster_dir, brokers=3)
    try:
        lines = launcher.read_until("bootstrap.servers=")
        zookeeper = _value(lines, "zookeeper.connect")
        bootstrap = _value(lines, "bootstrap.servers").split(",")
        assert len(bootstrap) == 3
        metrics = _value(lines, "metrics").split(",")
        for i, (address, url) in enumerate(zip(bootstrap, metrics, strict=True), 1):
            assert f"  broker {i}: {address}, metrics {url}" in lines
            status, text = get(url)
            assert status == 200 and "kafka_server_replicamanager_partitioncount" in text
        assert len(set(metrics)) == 3
        host, port = zookeeper.rsplit(":", 1)
        assert parse_srvr(four_letter_word(host, int(port), "srvr"))["Mode"] == "standalone"
        for address in bootstrap:  # one cluster: each broker lists all three
            client = AdminClient({"bootstrap.servers": address})
            deadline = time.monotonic() + 30
            while True:  # a registration reaches the others through a watch, just after
                brokers = client.list_topics(timeout=30).brokers.values()
                listed = sorted(f"{b.host}:{b.port}" for b in brokers)
                if listed == sorted(bootstrap) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert listed == sorted(bootstrap)
        assert sorted(p.name for p in cluster_dir.iterdir()) == [
            "broker-1",
            "broker-1.out",
            "broker-2",
            "broker-2.out",
            "broker-3",
            "broker-3.out",
            "zookeeper",
        ]
        pids = _broker_pids(cluster_dir)
        assert sorted(pids) == [1, 2, 3]
        os.kill(pids[2], signal.SIGKILL)
        killed = time.monotonic()
        assert launcher.read_until("kafkalite cluster: ")[-1] == (
            f"kafkalite cluster: broker 2 exited (code {-signal.SIGKILL})"
        )
        assert time.monotonic() - killed < 10  # polled every second, not left to Ctrl-C
        assert launcher.stop() == 0
        assert launcher.read_until("kafkalite cluster stopped")
        assert all(_refused(address) for address in [zookeeper, *bootstrap])
        assert _leftovers(cluster_dir) == []
    finally:
        launcher.stop()

    again = Launcher(cluster_dir, brokers=1)
    try:
        lines = again.read_until("bootstrap.servers=")
        assert _value(lines, "zookeeper.connect") == zookeeper  # same data dir, same port
    finally:
        assert again.stop() == 0


def test_a_broker_that_cannot_start_is_named_with_its_reason(tmp_path: Path) -> None:
    """What `kafkalite cluster` prints when a broker exits at start (no ZooKeeper needed:
    this broker fails before it would join)."""
    cluster = LocalCluster(tmp_path, 2, {"kafkalite.metrics.host": "192.0.2.1"})  # TEST-NET-1
    broker = BrokerProcess(tmp_path / "broker-1", cluster.broker_overrides(1, "127.0.0.1:1"))
    with pytest.raises(RuntimeError) as failed:
        cluster.start_broker(1, broker)
    assert str(failed.value) == (
        "broker 1: kafkalite exited with code 2 before it started: kafkalite: cannot listen"
        " for metrics on 192.0.2.1:0: Cannot assign requested address"
    )


def test_metrics_ports_are_free_or_one_per_broker_from_the_given_one() -> None:
    def ports(overrides: dict[str, str]) -> list[str]:
        cluster = LocalCluster(Path("unused"), 3, overrides)
        return [cluster.broker_overrides(i, "zk:2181")["kafkalite.metrics.port"] for i in (1, 2, 3)]

    assert ports({}) == ["0", "0", "0"]
    assert ports({"kafkalite.metrics.port": "9404"}) == ["9404", "9405", "9406"]
    assert ports({"kafkalite.metrics.port": "-1"}) == ["-1", "-1", "-1"]


def test_tiered_brokers_tier_to_the_clusters_own_s3_server(tmp_path: Path) -> None:
    """`--tiered`: every broker gets the S3 server's settings (an --override still wins), the
    metadata topic's replication factor fits the broker count, and the server keeps its
    port across runs on the same data dir (no process is started here)."""
    server = s3_server(tmp_path)
    cluster = LocalCluster(tmp_path, 2, {"remote.log.manager.task.interval.ms": "5000"})
    cluster.s3 = server
    overrides = cluster.broker_overrides(1, "127.0.0.1:1")
    assert overrides["remote.log.storage.system.enable"] == "true"
    assert overrides["rsm.config.storage.s3.endpoint.url"] == server.endpoint_url
    assert overrides["rlmm.config.remote.log.metadata.topic.replication.factor"] == "2"
    assert overrides["remote.log.manager.task.interval.ms"] == "5000"
    assert s3_server(tmp_path).port == server.port
    assert "remote.log.storage.system.enable" not in LocalCluster(tmp_path, 2).broker_overrides(
        1, "127.0.0.1:1"
    )


def test_secure_cluster_serves_the_printed_admin_settings_only(cluster_dir: Path) -> None:
    """`--secure` with 2 brokers: the printed confluent-kafka settings create a topic
    replicated on both, produce acks=all (the follower fetched over SASL_SSL as the super user
    `broker`) and consume; the properties file gives the same settings; a plaintext client is
    refused."""
    launcher = Launcher(cluster_dir, 2, "--secure")
    try:
        lines = launcher.read_until("  Kafka tools: --command-config ")
        [printed] = [line for line in lines if line.startswith("  confluent-kafka: ")]
        config = json.loads(printed.removeprefix("  confluent-kafka: "))
        assert config["bootstrap.servers"] == _value(lines, "bootstrap.servers")
        assert config["security.protocol"] == "SASL_SSL"
        properties = Path(lines[-1].removeprefix("  Kafka tools: --command-config "))
        assert read_command_config(properties) == config  # as `--command-config` reads it

        admin = AdminClient(config)
        admin.create_topics([NewTopic("secured", 1, 2)])["secured"].result(timeout=30)
        errors: list[object] = []
        producer = Producer({**config, "acks": "all", "message.timeout.ms": 20000})
        producer.produce("secured", b"hello", on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(30) == 0 and errors == [None]
        consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secured"])
        try:
            deadline = time.monotonic() + 30
            message = None
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(1)
            assert message is not None and message.error() is None
            assert message.value() == b"hello"
        finally:
            consumer.close()

        plaintext = AdminClient({"bootstrap.servers": config["bootstrap.servers"]})
        with pytest.raises(KafkaException):
            plaintext.list_topics(timeout=3)
    finally:
        assert launcher.stop() == 0
