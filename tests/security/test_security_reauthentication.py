"""Re-authentication (KIP-368) against a broker whose SASL sessions last
connections.max.reauth.ms: raw frames (the session lifetime sent, a renewal, a request after
the session ended closes the connection) and librdkafka renewing its sessions while it
produces."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from kafkalite.testing import EmbeddedBroker
from protocol_tests.raw_client import RawClient, build, metadata_request
from tests.security.conftest import JAAS

LIFETIME_MS = 1000


@pytest.fixture(scope="module")
def reauth_broker() -> Iterator[EmbeddedBroker]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(LIFETIME_MS),
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        yield broker


def _authenticate(client: RawClient) -> Any:
    handshake = build(17, 1, "SaslHandshakeRequest", mechanism="PLAIN")
    assert client.request(handshake).error_code == ErrorCode.none
    token = b"\0alice\0alice-secret"
    return client.request(build(36, 2, "SaslAuthenticateRequest", auth_bytes=token))


def test_session_renewed_then_ended(reauth_broker: EmbeddedBroker) -> None:
    with RawClient("127.0.0.1", reauth_broker.port) as client:
        first = _authenticate(client)
        assert first.session_lifetime.total_seconds() * 1000 == LIFETIME_MS
        assert client.request(metadata_request([])).brokers
        renewed = _authenticate(client)  # a handshake on the authenticated connection
        renewed_at = time.monotonic()
        assert (renewed.error_code, renewed.session_lifetime.total_seconds() * 1000) == (
            ErrorCode.none,
            LIFETIME_MS,
        )
        assert client.request(metadata_request([])).brokers
        while time.monotonic() < renewed_at + LIFETIME_MS / 1000 + 0.1:  # the session's end
            time.sleep(0.05)
        client.send(metadata_request([]))
        assert client.is_closed_by_peer()
        assert not client._buffer  # closed unanswered


def test_librdkafka_renews_its_sessions(reauth_broker: EmbeddedBroker) -> None:
    topic = reauth_broker.create_topic("reauth")
    metrics = reauth_broker.broker.metrics
    renewed_before = metrics.successful_reauthentications
    delivered: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": reauth_broker.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
    )
    deadline = time.monotonic() + 10
    sent = 0
    while time.monotonic() < deadline and metrics.successful_reauthentications < renewed_before + 2:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(10) == 0
    assert metrics.successful_reauthentications >= renewed_before + 2
    assert metrics.failed_reauthentications == 0
    assert delivered == [None] * sent
