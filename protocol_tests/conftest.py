"""Fixtures for raw-protocol tests: one shared broker, raw connections, fresh topics."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from kafkalite.testing import BrokerProcess, stop_all
from protocol_tests.raw_client import (
    PROTOCOL_BROKER_OVERRIDES,
    RawClient,
    metadata_request,
    unique_name,
)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the whole protocol suite; tests keep apart by unique topic names."""
    process = BrokerProcess(tmp_path_factory.mktemp("protocol-broker"), PROTOCOL_BROKER_OVERRIDES)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def broker_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., BrokerProcess]]:
    """Start extra brokers with overrides; all stopped at teardown."""
    started: list[BrokerProcess] = []

    def start(overrides: Mapping[str, str] | None = None) -> BrokerProcess:
        process = BrokerProcess(
            tmp_path_factory.mktemp("protocol-extra"),
            {**PROTOCOL_BROKER_OVERRIDES, **(overrides or {})},
        )
        started.append(process)
        return process.start()

    try:
        yield start
    finally:
        stop_all(started)


@pytest.fixture
def connect(broker: BrokerProcess) -> Iterator[Callable[..., RawClient]]:
    """Open raw connections (to the shared broker unless told otherwise); closed after."""
    clients: list[RawClient] = []

    def open_client(target: BrokerProcess | None = None) -> RawClient:
        target = target or broker
        client = RawClient(target.host, target.port)
        clients.append(client)
        return client

    try:
        yield open_client
    finally:
        for client in clients:
            client.close()


@pytest.fixture
def client(connect: Callable[..., RawClient]) -> RawClient:
    return connect()


@pytest.fixture
def new_topic(client: RawClient) -> Callable[..., tuple[str, uuid.UUID]]:
    """Create a topic by auto-creation through Metadata: returns (name, topic id)."""

    def create(prefix: str = "proto") -> tuple[str, uuid.UUID]:
        name = unique_name(prefix)
        response = client.request(metadata_request([name], auto_create=True))
        (topic,) = response.topics
        assert topic.error_code == 0, f"auto-creating {name}: error {topic.error_code}"
        assert topic.topic_id is not None and topic.topic_id.int != 0
        return name, topic.topic_id

    return create
