"""Run a real kafkalite broker, for tests, compatibility suites and benchmarks.

`BrokerProcess`: a `kafkalite serve` subprocess (kafkalite/process.py, with `free_ports`,
`stop_all` and `error_records`, re-exported here).

`EmbeddedBroker`: the same broker in this process, its trio event loop in a thread: it answers
within milliseconds of `start()` (no interpreter start, no imports), which is what the pytest
plugin (kafkalite/pytest_plugin.py) uses. Its own data dir, port and event loop keep it apart
from every other broker; only the GIL is shared with the test.

    with EmbeddedBroker() as broker:          # a temp dir, removed after
        Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from kafkalite.process import BrokerProcess, error_records, free_ports, stop_all

__all__ = [
    "EMBEDDED_DEFAULTS",
    "BrokerProcess",
    "EmbeddedBroker",
    "error_records",
    "free_ports",
    "stop_all",
]

# Settings that suit tests: groups form at once, few __consumer_offsets partitions.
EMBEDDED_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
}


def import_broker_modules() -> None:
    """The broker's modules (about a second of CPU; EmbeddedBroker.start does it first)."""
    import kafkalite.broker.broker  # noqa: F401
    import kafkalite.server  # noqa: F401


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
        self.listener_ports: dict[str, int] = {}  # every advertised listener's port, by name
        self.broker: Any = None  # kafkalite.broker.broker.Broker while running
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stage = ""  # what start() is waiting for, for its timeout message
        self._stop_requested = threading.Event()  # also before the event loop can be cancelled

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def bootstrap_of(self, listener: str) -> str:
        """host:port of a named listener (`listeners` may name several)."""
        return f"{self.host}:{self.listener_ports[listener.upper()]}"

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        """Start and wait up to `timeout` seconds for the broker to listen; the broker's
        imports (seconds on a loaded machine, the first time) are done before the clock."""
        if self._thread is not None:
            raise RuntimeError("the broker is running: stop() it first")
        import_broker_modules()
        self._ready.clear()
        self._stop_requested.clear()
        self._error = None
        self._stage = "starting its event loop"
        self._thread = threading.Thread(
            target=trio.run, args=(self._main,), name=f"kafkalite-{id(self):x}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            error, stage = self._error, self._stage
            self.stop()
            if error is None:
                raise RuntimeError(
                    f"kafkalite did not start within {timeout:g}s (imports excluded): still {stage}"
                )
            raise RuntimeError(f"kafkalite did not start: {error} (while {stage})") from error
        return self

    async def _main(self) -> None:
        from kafkalite.broker.broker import Broker
        from kafkalite.config import build_config
        from kafkalite.metrics.http import open_metrics_listeners
        from kafkalite.server import bound_config, open_listeners, serve

        try:
            self._stage = "reading its configuration"
            config = build_config(self.overrides)
            where = ", ".join(f"{lst.host}:{lst.port}" for lst in config.listeners)
            self._stage = f"binding its listeners ({where})"
            listeners = await open_listeners(config)
            config = bound_config(config, listeners)
            metrics_listeners = await open_metrics_listeners(config)  # as `kafkalite serve`
            self._stage = f"opening its log dirs ({', '.join(map(str, config.log_dirs))})"
            broker = Broker.open(config)
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        try:
            with trio.CancelScope() as self._cancel:
                self._token = trio.lowlevel.current_trio_token()
                if self._stop_requested.is_set():  # start() gave up while the broker opened
                    self._cancel.cancel()
                async with trio.open_nursery() as nursery:
                    self._stage = "starting its server"
                    await nursery.start(
                        lambda task_status: serve(
                            broker,
                            listeners,
                            metrics_listeners,
                            handle_signals=False,
                            task_status=task_status,
                        )
                    )
                    advertised = config.advertised_listeners[0]
                    self.host, self.port = advertised.host, advertised.port
                    self.listener_ports = {a.name: a.port for a in config.advertised_listeners}
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
            manager = self.broker.admin_manager
            outcome, configs = manager.check_new_topic(name, partitions, 1, dict(config or {}))
            if outcome.ok:
                outcome, _ = manager.create_topic(name, partitions, 1, configs)
            if not outcome.ok:
                raise ValueError(f"cannot create topic {name}: {outcome.message or outcome.error}")

        self.call(create)
        return name

    def delete_topic(self, name: str) -> None:
        self.call(lambda: self.broker.admin_manager.delete_topic(name))

    def stop(self, timeout: float = 30.0) -> None:
        self._stop_requested.set()  # before reading the token: see _main
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
