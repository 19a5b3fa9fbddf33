"""Run a real Apache Kafka broker process (KRaft, one combined broker+controller node).

The jars come from compat/kafka_dist.py (Maven Central, cached). `KafkaServer` mirrors
kafkalite.testing.BrokerProcess: `start()` picks free ports for the PLAINTEXT and CONTROLLER
listeners on 127.0.0.1, writes `server.properties` and a log4j2 config into the data dir,
formats the storage once (`kafka-storage format --standalone`, random cluster id), starts
`java -cp <lib>/* kafka.Kafka server.properties` and waits until the broker answers a Metadata
request listing itself (so it is unfenced and takes CreateTopics); `stop()` sends SIGTERM,
waits, then SIGKILLs. The broker logs to `<data_dir>/server.log`; its stdout/stderr go to
`<data_dir>/kafka.out`.

    python -m compat.kafka_server [--data-dir DIR] [--override key=value]...

starts one in the foreground, prints its bootstrap and runs until Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from compat.kafka_dist import CompatSetupError, java_executable, kafka_lib, kafka_version
from kafkalite.testing import free_ports

# Settings for one node and for fair comparisons with kafkalite; `overrides` win.
SINGLE_NODE_DEFAULTS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

JVM_OPTS = (
    "-Xms256m",
    "-Xmx768m",
    # As kafka-run-class.sh does:
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
"""


def random_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): url-safe base64, no padding, no leading '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    lines = [f"{key}={value}" for key, value in properties.items()]
    path.write_text("\n".join(lines) + "\n")


class KafkaServer:
    def __init__(self, data_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.host = "127.0.0.1"
        self.port = 0
        self.controller_port = 0
        self.cluster_id: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.version = kafka_version()
        self.startup_seconds: float | None = None
        # More `kafka-storage format` arguments (e.g. `--add-scram ...`: users at bootstrap).
        self.format_arguments: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def properties_file(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "kraft-logs"

    def properties(self) -> dict[str, str]:
        listeners = (
            f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
        )
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "log.dirs": str(self.log_dir),
            **SINGLE_NODE_DEFAULTS,
            **self.overrides,
        }

    def _previous_ports(self) -> tuple[int, int] | None:
        """The ports of an earlier run on this (formatted) data dir: the controller's is in
        the quorum's bootstrap voter set, and a stable bootstrap suits a restart."""
        if not (self.log_dir / "meta.properties").is_file():
            return None
        try:
            text = self.properties_file.read_text()
        except OSError:
            return None
        match = re.search(
            r"^listeners=PLAINTEXT://[^:]+:(\d+),CONTROLLER://[^:]+:(\d+)$", text, re.MULTILINE
        )
        return (int(match.group(1)), int(match.group(2))) if match else None

    def _java(self, main_class: str, *args: str, heap: tuple[str, ...] = ()) -> list[str]:
        log4j = self.data_dir / "log4j2.properties"
        return [
            java_executable(),
            *heap,
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp",
            str(kafka_lib(self.version) / "*"),
            main_class,
            *args,
        ]

    def format(self) -> KafkaServer:
        """Pick ports, write the configs, and format the storage unless it already is.

        `start()` calls it; call it first to time the broker's start alone."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.port and self.controller_port):
            self.port, self.controller_port = self._previous_ports() or free_ports(2, self.host)
        write_properties(self.properties_file, self.properties())
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        if (self.log_dir / "meta.properties").is_file():
            return self  # formatted by an earlier start (restart on the same data dir)
        self.cluster_id = random_cluster_id()
        cmd = self._java(
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            "--cluster-id",
            self.cluster_id,
            "--config",
            str(self.properties_file),
            *self.format_arguments,
            heap=("-Xmx256m", "-XX:TieredStopAtLevel=1"),
        )
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()[-3000:]
            raise CompatSetupError(
                f"kafka-storage format failed (exit {result.returncode}):\n{output}"
            )
        return self

    def start(self, timeout: float = 120.0) -> KafkaServer:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"Apache Kafka is already running on {self.bootstrap}")
        started = time.monotonic()
        self.format()
        cmd = self._java("kafka.Kafka", str(self.properties_file), heap=JVM_OPTS)
        with open(self.data_dir / "kafka.out", "ab") as out:
            self.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = started + timeout
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop(timeout=10)
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise CompatSetupError(
                    f"Apache Kafka exited with code {self.process.returncode} during startup:\n"
                    + self.log_tail()
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CompatSetupError(
                    f"Apache Kafka did not answer on {self.bootstrap} in time:\n" + self.log_tail()
                )
            if self._port_open() and self._answers(min(remaining, 5.0)):
                return
            time.sleep(0.1)

    def _port_open(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def _answers(self, timeout: float) -> bool:
        """A Metadata request lists this broker (it is unfenced: topics can be created)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({**self.client_config(), "log_level": 0})
        try:
            return bool(admin.list_topics(timeout=max(timeout, 0.5)).brokers)
        except Exception:
            return False

    def client_config(self) -> dict[str, Any]:
        """librdkafka's settings for a client of this broker (a secured one adds its login)."""
        return {"bootstrap.servers": self.bootstrap}

    def log_tail(self, lines: int = 40) -> str:
        chunks = []
        for path in (self.log_file, self.data_dir / "kafka.out"):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                chunks.append(f"--- {path} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(chunks) or "(no log output)"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        """Signal the broker and wait for it; SIGKILL if it does not stop in time."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.process = None
        return process.returncode


@contextlib.contextmanager
def _data_dir(path: str | None) -> Iterator[Path]:
    if path:
        yield Path(path)
    else:
        with tempfile.TemporaryDirectory(prefix="kafka-") as tmp:
            yield Path(tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat.kafka_server",
        description="Run one Apache Kafka broker (KRaft) in the foreground; print its bootstrap.",
    )
    parser.add_argument("--data-dir", help="data directory (default: a temporary one)")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="broker property"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="startup timeout (s)")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--override {item!r} is not key=value")
        overrides[key.strip()] = value.strip()

    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)  # also when started with SIGINT ignored (&)
    with _data_dir(args.data_dir) as data_dir:
        server = KafkaServer(data_dir, overrides)
        try:
            server.start(timeout=args.timeout)
        except CompatSetupError as exc:
            print(f"compat: {exc}", file=sys.stderr)
            return 2
        try:
            print(server.bootstrap, flush=True)
            print(
                f"Apache Kafka {server.version} ready in {server.startup_seconds:.1f}s,"
                f" data in {data_dir}, log {server.log_file} (Ctrl-C stops it)",
                file=sys.stderr,
                flush=True,
            )
            while not stop_requested and server.process and server.process.poll() is None:
                time.sleep(0.2)
        finally:
            code = server.stop()
    return 0 if stop_requested or code in (0, 143, -signal.SIGTERM) else 1


if __name__ == "__main__":
    sys.exit(main())
