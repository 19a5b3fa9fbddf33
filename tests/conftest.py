"""Shared fixtures: real kafkalite broker processes in temporary data dirs, unique topic names.

- `broker`: a fresh broker for one test (stopped after).
- `broker_factory`: start brokers with overrides (and optionally a given data dir); every
  broker it started is stopped at teardown.
- `module_broker_factory` / `module_broker`: the same, shared by the tests of one module,
  for tests that do not need a fresh broker (they keep apart through unique topic names).
- `topic_name`: makes unique, legal topic names.

With PYTHONDONTWRITEBYTECODE set, every `kafkalite serve` subprocess would compile each module
it imports from source (0.3-0.5 s of CPU per broker, hundreds of brokers per run): the
processes the tests start cache bytecode in the session's temp dir instead (the source tree
stays free of __pycache__).

Hypothesis runs derandomized (the same examples every run, so CI is deterministic); set
HYPOTHESIS_PROFILE=explore to search with fresh random examples, and more of them.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from kafkalite.testing import BrokerProcess, stop_all

if TYPE_CHECKING:
    from kafkalite.s3_server import S3Server

# Small and quick by default; tests add what they need.
DEFAULT_OVERRIDES: dict[str, str] = {
    "num.partitions": "1",
}

BrokerFactory = Callable[..., BrokerProcess]

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(scope="session", autouse=True)
def _subprocess_bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE")
        patch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path_factory.mktemp("pycache")))
        yield


class _Brokers:
    def __init__(self, tmp_path_factory: pytest.TempPathFactory, basename: str) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.basename = basename
        self.started: list[BrokerProcess] = []

    def __call__(
        self,
        overrides: Mapping[str, str] | None = None,
        data_dir: Path | None = None,
        start: bool = True,
        log_level: str | None = None,
    ) -> BrokerProcess:
        data_dir = data_dir or self.tmp_path_factory.mktemp(self.basename)
        process = BrokerProcess(
            data_dir, {**DEFAULT_OVERRIDES, **(overrides or {})}, log_level=log_level
        )
        self.started.append(process)
        return process.start() if start else process

    def stop_all(self) -> None:
        stop_all(self.started)


@pytest.fixture
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    brokers = _Brokers(tmp_path_factory, "broker")
    try:
        yield brokers
    finally:
        brokers.stop_all()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    brokers = _Brokers(tmp_path_factory, "module-broker")
    try:
        yield brokers
    finally:
        brokers.stop_all()


@pytest.fixture(scope="module")
def module_broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory()


def make_topic_name(hint: str = "t") -> str:
    """A legal topic name (Kafka: [a-zA-Z0-9._-], at most 249 chars) no other test uses."""
    cleaned = re.sub(r"[^a-zA-Z0-9._-]+", "-", hint).strip("-.")[:60] or "t"
    return f"{cleaned}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Call to get a fresh topic name derived from the test's name."""

    def make(suffix: str = "") -> str:
        return make_topic_name(f"{request.node.name}{'-' + suffix if suffix else ''}")

    return make


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """gofakes3 on a free port with its buckets in a temp dir (built once under .cache/), for
    the tiered-storage tests; skipped where it cannot be provisioned, except in CI."""
    from kafkalite.maven_dist import ProvisionError
    from kafkalite.s3_server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3"))
    try:
        server.start()
    except ProvisionError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no S3 test server: {exc}")
    try:
        yield server
    finally:
        server.close()
