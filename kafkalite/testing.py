"""Run a real kafkalite broker, for tests, compatibility suites and benchmarks.

`BrokerProcess`: a `kafkalite serve` subprocess. It listens on port 0 and its "kafkalite
started" log line carries the real port, so there is no free-port race and no polling: a
reader thread signals when the line appears.

`EmbeddedBroker`: the same broker in this process, its trio event loop in a thread: it answers
within milliseconds of `start()` (no interpreter start, no imports), which is what the pytest
plugin (kafkalite/pytest_plugin.py) uses. Its own data dir, port and event loop keep it apart
from every other broker; only the GIL is shared with the test.

    with EmbeddedBroker() as broker:          # a temp dir, removed after
        Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import trio

_STARTED = re.compile(r"kafkalite started: .* listening on (\S+):(\d+)")
_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_KEPT_LINES = 1000  # of a broker with an output file


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
        self._started = threading.Event()
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
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read_output, args=(self.process,), daemon=True)
        self._reader.start()
        if not self._started.wait(timeout) or self.process.poll() is not None:
            output = "".join(self.lines[-30:])
            self.stop()
            raise RuntimeError(f"kafkalite did not start within {timeout}s:\n{output}")
        return self

    def _read_output(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with contextlib.ExitStack() as stack:
            output = stack.enter_context(open(self.output_file, "a")) if self.output_file else None
            for line in process.stdout:
                self._take_line(line, output)
        self._started.set()  # process ended: wake a waiting start()

    def _take_line(self, line: str, output: TextIO | None) -> None:
        self.lines.append(line)
        if output is not None:
            output.write(line)
            output.flush()
            if len(self.lines) > 2 * _KEPT_LINES:
                del self.lines[:-_KEPT_LINES]
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


def stop_all(brokers: Iterable[BrokerProcess | EmbeddedBroker]) -> None:
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


# Settings that suit tests: groups form at once, few __consumer_offsets partitions.
EMBEDDED_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}


class EmbeddedBroker:
    """A kafkalite broker in a thread of this process (see the module docstring)."""

    def __init__(
        self, data_dir: Path | None = None, overrides: Mapping[str, str] | None = None
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafkalite-"))
        self.overrides = {
            **EMBEDDED_DEFAULTS,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            **(overrides or {}),
            "log.dirs": str(self.data_dir),
        }
        self.host = "127.0.0.1"
        self.port = 0
        self.broker: Any = None  # kafkalite.broker.broker.Broker while running
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        if self._thread is not None:
            raise RuntimeError("the broker is running: stop() it first")
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(
            target=trio.run, args=(self._main,), name=f"kafkalite-{id(self):x}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            error = self._error
            self.stop()
            raise RuntimeError(f"kafkalite did not start: {error or 'timed out'}") from error
        return self

    async def _main(self) -> None:
        from kafkalite.broker.broker import Broker
        from kafkalite.config import build_config
        from kafkalite.server import bound_config, open_listeners, serve

        try:
            config = build_config(self.overrides)
            listeners = await open_listeners(config)
            config = bound_config(config, listeners)
            broker = Broker.open(config)
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        try:
            with trio.CancelScope() as self._cancel:
                self._token = trio.lowlevel.current_trio_token()
                async with trio.open_nursery() as nursery:
                    await nursery.start(
                        lambda task_status: serve(
                            broker, listeners, handle_signals=False, task_status=task_status
                        )
                    )
                    advertised = config.advertised_listeners[0]
                    self.host, self.port = advertised.host, advertised.port
                    self.broker = broker
                    self._ready.set()
        finally:
            self.broker = None
            broker.shutdown()

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run `function(*args)` in the broker's event loop (its state is not thread-safe)."""
        if self._token is None or self.broker is None:
            raise RuntimeError("the broker is not running")
        return trio.from_thread.run_sync(function, *args, trio_token=self._token)

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        """Create a topic directly (no client needed); raises ValueError when refused."""

        def create() -> None:
            manager = self.broker.replica_manager
            outcome, configs = manager.check_new_topic(name, partitions, 1, dict(config or {}))
            if outcome.ok:
                outcome, _ = manager.create_topic(name, partitions, 1, configs)
            if not outcome.ok:
                raise ValueError(f"cannot create topic {name}: {outcome.message or outcome.error}")

        self.call(create)
        return name

    def delete_topic(self, name: str) -> None:
        self.call(lambda: self.broker.replica_manager.delete_topic(name))

    def stop(self, timeout: float = 30.0) -> None:
        thread, token, cancel = self._thread, self._token, self._cancel
        if thread is None:
            return
        if token is not None and cancel is not None and thread.is_alive():
            try:
                trio.from_thread.run_sync(cancel.cancel, trio_token=token)
            except trio.RunFinishedError:
                pass
        thread.join(timeout)
        self._thread = self._token = self._cancel = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
