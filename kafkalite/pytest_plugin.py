"""kafkalite as the Kafka of your tests: a pytest plugin, loaded through the `pytest11` entry
point when kafkalite is installed.

Fixtures (brokers run in-process, see kafkalite.testing.EmbeddedBroker; each has its own temp
dir and free port and is stopped at the end, also when the test fails):

- `kafkalite_broker` (session): one broker for the whole session; `.bootstrap` is "host:port".
- `kafkalite_topic` (function): `kafkalite_topic(partitions=1, config=None) -> name` creates a
  fresh topic on the session broker; the topics are deleted after the test.
- `kafkalite_fresh_broker` (function): a broker of its own for one test.
- `kafkalite_broker_factory` (function): `factory(overrides=None, process=False)` starts
  brokers with broker properties (`process=True`: a `kafkalite serve` subprocess instead);
  every one is stopped after the test.

The ini option `kafkalite_overrides` (lines of key=value) sets properties of every broker.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from kafkalite.testing import (
    EMBEDDED_DEFAULTS,
    BrokerProcess,
    EmbeddedBroker,
    import_broker_modules,
    stop_all,
)

FIXTURE_PREFIX = "kafkalite_"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "kafkalite_overrides",
        "broker properties (key=value lines) for every kafkalite fixture broker",
        type="linelist",
        default=[],
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """When a test uses a broker, import the broker's modules while collection finishes, so
    that the first fixture does not pay for them."""
    if any(
        name.startswith(FIXTURE_PREFIX)
        for item in items
        for name in getattr(item, "fixturenames", ())
    ):
        threading.Thread(target=import_broker_modules, daemon=True).start()


def _overrides(config: pytest.Config, extra: Mapping[str, str] | None) -> dict[str, str]:
    settings = {}
    for line in config.getini("kafkalite_overrides"):
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"kafkalite_overrides: {line!r} is not key=value")
        settings[key.strip()] = value.strip()
    return {**settings, **(extra or {})}


class _Brokers:
    """Starts brokers in temp dirs and stops every one of them."""

    def __init__(self, config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.config = config
        self.tmp_path_factory = tmp_path_factory
        self.started: list[Any] = []

    def __call__(
        self, overrides: Mapping[str, str] | None = None, process: bool = False
    ) -> EmbeddedBroker | BrokerProcess:
        data_dir = self.tmp_path_factory.mktemp("kafkalite")
        settings = _overrides(self.config, overrides)
        broker: Any = (
            BrokerProcess(data_dir, {**EMBEDDED_DEFAULTS, **settings})
            if process
            else EmbeddedBroker(data_dir, settings)
        )
        self.started.append(broker)
        return broker.start()

    def stop_all(self) -> None:
        stop_all(self.started)


@pytest.fixture(scope="session")
def kafkalite_broker(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedBroker]:
    """One broker for the whole session (stopped at its end)."""
    brokers = _Brokers(pytestconfig, tmp_path_factory)
    try:
        yield brokers()  # type: ignore[misc]
    finally:
        brokers.stop_all()


@pytest.fixture
def kafkalite_broker_factory(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., EmbeddedBroker | BrokerProcess]]:
    """`factory(overrides=None, process=False)` starts a broker; all stop after the test."""
    brokers = _Brokers(pytestconfig, tmp_path_factory)
    try:
        yield brokers
    finally:
        brokers.stop_all()


@pytest.fixture
def kafkalite_fresh_broker(
    kafkalite_broker_factory: Callable[..., EmbeddedBroker],
) -> EmbeddedBroker:
    """A broker of this test's own (stopped after it)."""
    return kafkalite_broker_factory()


@pytest.fixture
def kafkalite_topic(
    kafkalite_broker: EmbeddedBroker, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """`kafkalite_topic(partitions=1, config=None) -> name`: a fresh topic on the session
    broker, deleted after the test."""
    created: list[str] = []

    def make(partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        hint = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)
        name = f"{hint[:80]}-{uuid.uuid4().hex[:8]}"
        created.append(kafkalite_broker.create_topic(name, partitions, config))
        return name

    try:
        yield make
    finally:
        for name in created:
            kafkalite_broker.delete_topic(name)
