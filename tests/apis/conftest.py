"""Fixtures for the API tests: real in-process Brokers on temporary log dirs.

Here `broker` and `broker_factory` give `Broker` objects for calling handlers directly; they
shadow the broker-process fixtures of tests/conftest.py inside tests/apis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from kafkalite.broker.broker import Broker
from kafkalite.config import build_config


def open_broker(tmp_path: Path, overrides: Mapping[str, str] | None = None) -> Broker:
    return Broker.open(build_config({"log.dirs": str(tmp_path), **(overrides or {})}))


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Open a broker with extra properties; each gets its own log dir."""
    opened: list[Broker] = []

    def factory(**overrides: str) -> Broker:
        broker = open_broker(tmp_path / f"broker-{len(opened)}", overrides)
        opened.append(broker)
        return broker

    yield factory
    for broker in opened:
        broker.shutdown()


@pytest.fixture
def broker(broker_factory: Callable[..., Broker]) -> Broker:
    return broker_factory()
