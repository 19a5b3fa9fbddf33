"""Fixtures of the differential suites: every test taking `target` runs once per broker.

- `target_name`: "kafkalite" or "kafka" (session-scoped, parametrized over TARGETS; the test
  ids end in `[kafkalite]` / `[kafka]`).
- `target`: a `compat.targets.Target` (name, bootstrap) of a broker shared by the whole
  session, started on first use with `COMMON_DEFAULTS` and stopped at session end.
- `target_factory`: `target_factory(overrides) -> Target` starts a fresh broker of the same
  kind with other settings (e.g. a small message.max.bytes), stopped after the test.
- `secure_target`: a `compat.secure_targets.SecureTarget` of the same kind on SASL_SSL with
  SCRAM users and an authorizer (compat/secure_targets.py), shared by the session.
- `topic_name`: `topic_name(suffix="") -> str`, a fresh legal topic name from the test's name.
- Strict xfails on kafkalite only: `compat.targets.kafkalite_xfail(request, target, reason)`,
  with one line per xfail in compat/FINDINGS.md.

Every test under compat/ gets the `compat` marker; those on target kafka (`target_name`, or
`cluster_name` of the cluster suite) also get `kafka`
(`-m "not kafka"` runs kafkalite's side only). When real Kafka cannot be provisioned (no Java
>= 17, no Maven, no network), the kafka-side tests error at setup with that one-line reason;
they are never skipped.
"""

from __future__ import annotations

import gc
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from compat.kafka_dist import CompatSetupError
from compat.secure_targets import SecureTarget, start_secure_target
from compat.targets import TARGETS, Target, start_target
from kafkalite.testing import stop_all

COMPAT_DIR = Path(__file__).resolve().parent


class _TargetPool:
    """Brokers shared by the session, started lazily; a failed start is remembered so it is
    reported once per test instead of being retried (with its timeout) for every test."""

    def __init__(
        self, tmp_path_factory: pytest.TempPathFactory, starter: Callable[..., Any] = start_target
    ) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.starter = starter
        self.running: dict[str, tuple[Target, Any]] = {}
        self.failures: dict[str, str] = {}

    def start(self, name: str, overrides: Mapping[str, str] | None = None) -> tuple[Target, Any]:
        try:
            return self.starter(name, self.tmp_path_factory.mktemp(f"target-{name}"), overrides)
        except CompatSetupError as exc:
            raise _Unavailable(f"real Apache Kafka is unavailable: {exc}") from None
        except Exception as exc:
            raise _Unavailable(f"{name} did not start: {exc}") from None

    def get(self, name: str) -> Target:
        if name in self.failures:
            pytest.fail(self.failures[name], pytrace=False)
        if name not in self.running:
            try:
                self.running[name] = self.start(name)
            except _Unavailable as exc:
                self.failures[name] = str(exc)
            if name in self.failures:  # outside the except: no chained traceback
                pytest.fail(self.failures[name], pytrace=False)
        return self.running[name][0]

    def stop_all(self) -> None:
        # Clients that tests left in reference cycles go first, so they do not log
        # "Connection refused" once the brokers are gone.
        gc.collect()
        processes = [process for _, process in self.running.values()]
        self.running.clear()
        stop_all(processes)


class _Unavailable(Exception):
    pass


@pytest.fixture(scope="session")
def _target_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_TargetPool]:
    pool = _TargetPool(tmp_path_factory)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="session", params=TARGETS, ids=TARGETS)
def target_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def target(_target_pool: _TargetPool, target_name: str) -> Target:
    return _target_pool.get(target_name)


@pytest.fixture(scope="session")
def _secure_target_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_TargetPool]:
    pool = _TargetPool(tmp_path_factory, start_secure_target)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="session")
def secure_target(_secure_target_pool: _TargetPool, target_name: str) -> SecureTarget:
    """The target on SASL_SSL with SCRAM users and ACLs (compat/secure_targets.py)."""
    return _secure_target_pool.get(target_name)


@pytest.fixture
def target_factory(_target_pool: _TargetPool, target_name: str) -> Iterator[Callable[..., Target]]:
    processes: list[Any] = []

    def make(overrides: Mapping[str, str] | None = None) -> Target:
        if target_name in _target_pool.failures:
            pytest.fail(_target_pool.failures[target_name], pytrace=False)
        try:
            target, process = _target_pool.start(target_name, overrides)
        except _Unavailable as exc:
            failure = str(exc)
        else:
            processes.append(process)
            return target
        pytest.fail(failure, pytrace=False)

    try:
        yield make
    finally:
        stop_all(processes)


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


# Suites whose Kafka-side run only confirms the suite (and its allowlist) on Kafka itself.
REFERENCE_FILES = frozenset({"test_third_party.py"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(COMPAT_DIR):
            continue
        item.add_marker(pytest.mark.compat)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "kafka" in (
            callspec.params.get("target_name"),
            callspec.params.get("cluster_name"),
        ):
            item.add_marker(pytest.mark.kafka)
            if item.path.name in REFERENCE_FILES:
                item.add_marker(pytest.mark.reference)
