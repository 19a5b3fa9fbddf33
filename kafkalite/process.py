"""Run a real kafkalite broker as a `kafkalite serve` subprocess, and the helpers around it.

`BrokerProcess` listens on port 0 and its "kafkalite started" log line carries the real port,
so there is no free-port race and no polling: a reader thread signals when the line appears.
`free_ports` is for programs that cannot listen on port 0 (ZooKeeper, Kafka). Used by the
cluster launcher (cluster/launcher.py), the ZooKeeper runner, benchmarks and tests
(kafkalite.testing re-exports these names).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, TextIO

_STARTED = re.compile(r"kafkalite started: .* listening on (\S+):(\d+)")
_METRICS = re.compile(r"metrics on (http://\S+/metrics)")  # logged before the started line
_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_KEPT_LINES = 1000  # of a broker with an output file


class Stoppable(Protocol):
    def stop(self) -> object: ...


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        overrides: Mapping[str, str] | None = None,
        config_file: Path | None = None,
        log_level: str | None = None,
        output_file: Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            **(overrides or {}),
        }
        self.config_file = config_file
        self.log_level = log_level  # serve --log-level (the broker's default: INFO)
        # With an output file, the output goes there and `lines` keeps only the latest lines
        # (a long-running broker's log would grow without bound in memory).
        self.output_file = output_file
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.host = "127.0.0.1"
        self.port = 0
        self.metrics_url: str | None = None  # with kafkalite.metrics.port set
        self._started = threading.Event()
        self._output_ended = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kafkalite", "serve"]
        if self.config_file:
            cmd += ["--config", str(self.config_file)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        if self.log_level:
            cmd += ["--log-level", self.log_level]
        return cmd

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        if self.process is not None:
            if self.process.poll() is None:  # a second process would leave this one running
                raise RuntimeError("the broker is running: stop() or kill() it first")
            self.stop()  # it exited by itself: reap it and its reader
        self._started.clear()
        self._output_ended.clear()
        self.metrics_url = None
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read_output, args=(self.process,), daemon=True)
        self._reader.start()
        # _output_ended: it exited (it may not be reaped yet, so poll() can still say None).
        if not self._started.wait(timeout) or self._output_ended.is_set():
            reason = self._not_started(timeout)
            output = "".join(self.lines[-30:])
            self.stop()
            raise RuntimeError(f"{reason}:\n{output}")
        return self

    def _not_started(self, timeout: float) -> str:
        """What start() waited for in vain."""
        assert self.process is not None
        code = self.process.poll()
        if code is None and self._output_ended.is_set():  # exiting: its output is closed
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout)
        if code is not None:
            return f"kafkalite exited with code {code} before it started"
        missing = "output yet (still importing)" if not self.lines else "started line"
        return f"kafkalite did not start within {timeout:g}s: no {missing}"

    def _read_output(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with contextlib.ExitStack() as stack:
            output = stack.enter_context(open(self.output_file, "a")) if self.output_file else None
            for line in process.stdout:
                self._take_line(line, output)
        self._output_ended.set()
        self._started.set()  # process ended: wake a waiting start()

    def _take_line(self, line: str, output: TextIO | None) -> None:
        self.lines.append(line)
        if output is not None:
            output.write(line)
            output.flush()
            if len(self.lines) > 2 * _KEPT_LINES:
                del self.lines[:-_KEPT_LINES]
        metrics = _METRICS.search(line)
        if metrics:
            self.metrics_url = metrics.group(1)
        match = _STARTED.search(line)
        if match:
            self.host, self.port = match.group(1), int(match.group(2))
            self._started.set()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        """Signal the broker and wait for it; SIGKILL if it does not stop in time."""
        process = self.process
        if process is None:
            return None
        # Clients that tests dropped in reference cycles go first, so librdkafka does not log
        # "Connection refused" for them until the end of the run.
        gc.collect()
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(timeout)
        self.process = None
        return process.returncode

    def kill(self) -> int | None:
        return self.stop(signal.SIGKILL)

    def restart(self, **kwargs: float) -> BrokerProcess:
        """Stop cleanly and start again on the same data dir (and, if possible, port)."""
        self.stop()
        if self.port:
            self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        return self.start(**kwargs)

    def output(self) -> str:
        return "".join(self.lines)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def error_records(lines: Iterable[str]) -> list[str]:
    """The ERROR records (each with its traceback) among a broker's output lines."""
    records: list[list[str]] = []
    for line in lines:
        if _LOG_RECORD.match(line) or not records:
            records.append([line])
        else:
            records[-1].append(line)
    return [
        "".join(record)
        for record in records
        if " ERROR " in record[0] or "Traceback" in "".join(record)
    ]


def stop_all(brokers: Iterable[Stoppable]) -> None:
    """Stop every broker, even when stopping one fails (the first failure is raised after)."""
    errors = []
    for broker in brokers:
        try:
            broker.stop()
        except Exception as exc:  # keep stopping the others
            errors.append(exc)
    if errors:
        raise errors[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports the OS reports free now (held together, then released), for
    programs that cannot listen on port 0 and report the port (Kafka, ZooKeeper)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
        return ports
