"""A real Apache ZooKeeper server process (standalone), for the local cluster and its tests.

The jars come from Maven Central (kafkalite/cluster/zookeeper-pom.xml, via kafkalite.maven_dist)
into `.cache/zookeeper/<version>/lib` on first use; `KAFKALITE_ZOOKEEPER_CACHE` moves the cache.
`ZooKeeperServer.start()` writes `zoo.cfg` and a logback config into its data dir, picks a free
client port (kept for restarts, so clients reconnect to the same address), starts

    java -Dzookeeper.4lw.commands.whitelist=* -cp <lib>/* \
        org.apache.zookeeper.server.ZooKeeperServerMain <data_dir>/zoo.cfg

in its own process group, and returns once the `srvr` four-letter command reports it serving.
`stop()` sends SIGTERM to the group, waits, then SIGKILLs; `kill()` is the SIGKILL alone;
`restart()` starts again on the same data dir and port (znodes and sessions persist).
The server logs to `<data_dir>/zookeeper.log`; stdout/stderr go to `<data_dir>/zookeeper.out`.

    python -m kafkalite.cluster.zookeeper_server [--data-dir DIR]

runs one in the foreground, prints its connect string, and stops it on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from kafkalite.maven_dist import MavenDist, ProvisionError, java_executable
from kafkalite.process import free_ports

HERE = Path(__file__).resolve().parent
ZOOKEEPER = MavenDist(
    name="Apache ZooKeeper",
    pom=HERE / "zookeeper-pom.xml",
    version_property="zookeeper.version",
    default_cache=HERE.parent.parent / ".cache" / "zookeeper",
    cache_env="KAFKALITE_ZOOKEEPER_CACHE",
    main_jar="zookeeper-{version}",
    log_prefix="kafkalite",
)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JVM_OPTS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")

# zoo.cfg. The session bounds admit Kafka's zookeeper.session.timeout.ms (18000) and the short
# sessions of tests (ZooKeeper's own defaults are 2 and 20 ticks).
DEFAULT_CONFIG: dict[str, str] = {
    "tickTime": "500",
    "minSessionTimeout": "1000",
    "maxSessionTimeout": "60000",
    "initLimit": "10",
    "syncLimit": "5",
    "maxClientCnxns": "0",
    "admin.enableServer": "false",
    "autopurge.purgeInterval": "0",
}

_LOGBACK = """\
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{ISO8601}} %-5level [%thread] %logger{{1}}: %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def zookeeper_lib() -> Path:
    """The directory of ZooKeeper's jars, downloaded from Maven Central on first use."""
    return ZOOKEEPER.lib()


def four_letter_word(host: str, port: int, command: str, timeout: float = 5.0) -> str:
    """Send a four-letter command (ruok, srvr, stat, ...) and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def parse_srvr(text: str) -> dict[str, str]:
    """`srvr`'s `Key: value` lines as a dict (Mode, Node count, Zxid, ...)."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


class ZooKeeperServer:
    def __init__(self, data_dir: Path, config: Mapping[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.config = {**DEFAULT_CONFIG, **(config or {})}
        self.host = "127.0.0.1"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def connect_string(self) -> str:
        """For `zookeeper.connect` (append a chroot path as needed)."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_file(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def zoo_cfg(self) -> dict[str, str]:
        return {
            **self.config,
            "dataDir": str(self.data_dir / "data"),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
        }

    def command(self) -> list[str]:
        return [
            java_executable(ZOOKEEPER.name),
            *JVM_OPTS,
            "-Dzookeeper.4lw.commands.whitelist=*",
            f"-Dlogback.configurationFile={self.data_dir / 'logback.xml'}",
            "-cp",
            str(zookeeper_lib() / "*"),
            MAIN_CLASS,
            str(self.config_file),
        ]

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("ZooKeeper is running: stop() or kill() it first")
        command = self.command()  # provisions the jars before the clock starts
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:  # an earlier run's port: clients and brokers keep their connect string
            self.port = self._previous_port() or free_ports(1, self.host)[0]
        lines = [f"{key}={value}" for key, value in self.zoo_cfg().items()]
        self.config_file.write_text("\n".join(lines) + "\n")
        (self.data_dir / "logback.xml").write_text(_LOGBACK.format(log=self.log_file))
        started = time.monotonic()
        with open(self.data_dir / "zookeeper.out", "ab") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() reaches every child
            )
        try:
            self._wait_serving(started + timeout)
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _previous_port(self) -> int | None:
        with contextlib.suppress(OSError):
            for line in self.config_file.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "clientPort" and value.strip().isdigit():
                    return int(value)
        return None

    def _wait_serving(self, deadline: float) -> None:
        """Probe with `srvr` until it answers with a Mode: the server takes sessions then."""
        assert self.process is not None
        delay = 0.02
        while True:
            if self.process.poll() is not None:
                raise ProvisionError(
                    f"ZooKeeper exited with {self.process.returncode} during start:"
                    f" {self.tail_output()}"
                )
            if "Mode" in parse_srvr(self.probe("srvr")):
                return
            if time.monotonic() > deadline:
                raise ProvisionError(f"ZooKeeper did not start serving: {self.tail_output()}")
            time.sleep(delay)  # polling an external process's readiness, bounded above
            delay = min(delay * 2, 0.25)

    def probe(self, command: str = "ruok") -> str:
        """A four-letter command's answer, or "" while nothing accepts connections."""
        try:
            return four_letter_word(self.host, self.port, command, timeout=2.0)
        except OSError:
            return ""

    def srvr(self) -> dict[str, str]:
        return parse_srvr(self.probe("srvr"))

    def tail_output(self, lines: int = 20) -> str:
        texts = []
        for name in ("zookeeper.out", "zookeeper.log"):
            with contextlib.suppress(OSError):
                texts += (self.data_dir / name).read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(texts) or "(no output)"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Signal the process group and wait; SIGKILL it if it does not exit in time."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            self._signal_group(process, sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(process, signal.SIGKILL)
                process.wait()
        self.process = None
        return process.returncode

    def kill(self) -> int | None:
        return self.stop(signal.SIGKILL)

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)  # the group id is the pid (start_new_session)

    def restart(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Stop and start again on the same data dir and port."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_zookeeper(
    data_dir: Path | None = None, config: Mapping[str, str] | None = None
) -> Iterator[ZooKeeperServer]:
    """A started server, stopped on exit; in a temporary data dir (removed after) if none."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zookeeper-")))
        yield stack.enter_context(ZooKeeperServer(data_dir, config))


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """Inside, SIGINT and SIGTERM set the event instead of ending the process, so the
    processes started meanwhile get stopped. (Handlers, not a blocked signal mask: child
    processes would inherit the mask.)"""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for(stop: threading.Event, still_running: Callable[[], bool]) -> None:
    """Until `stop` is set or `still_running()` is false (checked every second)."""
    while still_running() and not stop.wait(1.0):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a standalone Apache ZooKeeper.")
    parser.add_argument("--data-dir", type=Path, help="kept after exit (default: a temp dir)")
    args = parser.parse_args(argv)
    try:
        with stop_signals() as stop, running_zookeeper(args.data_dir) as server:
            print(f"zookeeper.connect={server.connect_string}", flush=True)
            wait_for(stop, lambda: server.process is not None and server.process.poll() is None)
    except ProvisionError as exc:
        print(f"kafkalite: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
