"""Raw frames against a SASL listener (Kafka's SaslServerAuthenticator semantics) and TLS
failures against an SSL listener.

Nothing but ApiVersions and SaslHandshake is served before authentication: any other
request is left unanswered and the connection closed after
connection.failed.authentication.delay.ms. A failed TLS handshake costs one log line and that
connection; the broker goes on serving others.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.testing import EmbeddedBroker
from protocol_tests.raw_client import (
    RawClient,
    api_versions_request,
    build,
    metadata_request,
    response_class,
)
from tests.security.conftest import FAILED_AUTH_DELAY_MS, MECHANISMS, Pki, secure_overrides

DELAY_S = FAILED_AUTH_DELAY_MS / 1000


def _handshake(mechanism: str, version: int = 1) -> Any:
    return build(17, version, "SaslHandshakeRequest", mechanism=mechanism)


def _authenticate(token: bytes, version: int = 2) -> Any:
    return build(36, version, "SaslAuthenticateRequest", auth_bytes=token)


def _plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


@pytest.fixture
def sasl_client(secure_broker: EmbeddedBroker) -> Iterator[RawClient]:
    with RawClient("127.0.0.1", secure_broker.listener_ports["SASL_PLAINTEXT"]) as client:
        yield client


def _closed_without_answer(client: RawClient) -> float:
    """Seconds until the broker closed the connection, having sent nothing."""
    started = time.monotonic()
    assert client.is_closed_by_peer(timeout=10)
    assert not client._buffer, "the broker answered a request before authentication"
    return time.monotonic() - started


@pytest.mark.parametrize(
    "request_entity",
    [
        metadata_request(None),
        build(50, 0, "DescribeUserScramCredentialsRequest", users=None),
        build(51, 0, "AlterUserScramCredentialsRequest", deletions=(), upsertions=()),
        build(10, 4, "FindCoordinatorRequest", key="g", key_type=0),
        _authenticate(_plain("alice", "alice-secret")),
    ],
    ids=["Metadata", "DescribeUserScram", "AlterUserScram", "FindCoordinator", "SaslAuthenticate"],
)
@pytest.mark.parametrize("after_api_versions", [False, True])
def test_nothing_else_is_served_before_authentication(
    sasl_client: RawClient, request_entity: Any, after_api_versions: bool
) -> None:
    if after_api_versions:
        assert sasl_client.request(api_versions_request()).error_code == ErrorCode.none
    sasl_client.send(request_entity)
    assert _closed_without_answer(sasl_client) >= DELAY_S * 0.9


def test_handshake_v1_and_authenticate_then_requests_are_served(
    secure_broker: EmbeddedBroker, sasl_client: RawClient
) -> None:
    versions = sasl_client.request(api_versions_request())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert advertised[17] == (0, 1) and advertised[36] == (0, 2)
    handshake = sasl_client.request(_handshake("PLAIN"))
    assert handshake.error_code == ErrorCode.none
    assert handshake.mechanisms == MECHANISMS
    authenticated = sasl_client.request(_authenticate(_plain("alice", "alice-secret")))
    assert (authenticated.error_code, authenticated.error_message) == (ErrorCode.none, None)
    metadata = sasl_client.request(metadata_request([]))
    assert [b.port for b in metadata.brokers] == [secure_broker.listener_ports["SASL_PLAINTEXT"]]
    again = sasl_client.request(_handshake("PLAIN"))  # a session without end: not renewed
    assert again.error_code == ErrorCode.illegal_sasl_state


def test_handshake_v0_takes_raw_tokens(sasl_client: RawClient) -> None:
    assert sasl_client.request(_handshake("PLAIN", version=0)).error_code == ErrorCode.none
    sasl_client.send_frame(_plain("alice", "alice-secret"))
    assert sasl_client.recv_frame() == b""  # PLAIN's empty challenge, size-prefixed
    assert sasl_client.request(metadata_request([])).brokers


def test_unsupported_mechanism(sasl_client: RawClient) -> None:
    response = sasl_client.request(_handshake("GSSAPI"))
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert response.mechanisms == MECHANISMS
    assert sasl_client.is_closed_by_peer()


@pytest.mark.parametrize(
    ("mechanism", "token", "message"),
    [
        ("PLAIN", _plain("alice", "wrong"), "Authentication failed: Invalid username or password"),
        ("PLAIN", _plain("nobody", "x"), "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            b"n,,n=nobody,r=abcdefghijklmnop",
            "Authentication failed during authentication due to invalid credentials with SASL"
            " mechanism SCRAM-SHA-256",
        ),
    ],
)
def test_failed_authentication_is_answered_then_closed_after_the_delay(
    sasl_client: RawClient, mechanism: str, token: bytes, message: str
) -> None:
    assert sasl_client.request(_handshake(mechanism)).error_code == ErrorCode.none
    started = time.monotonic()
    response = sasl_client.request(_authenticate(token))
    assert (response.error_code, response.error_message) == (
        ErrorCode.sasl_authentication_failed,
        message,
    )
    assert sasl_client.is_closed_by_peer()
    assert time.monotonic() - started >= DELAY_S * 0.9


def test_second_api_versions_closes_at_once(sasl_client: RawClient) -> None:
    sasl_client.request(api_versions_request())
    sasl_client.send(api_versions_request())
    assert _closed_without_answer(sasl_client) < DELAY_S


def test_other_request_after_handshake_is_illegal_sasl_state(sasl_client: RawClient) -> None:
    assert sasl_client.request(_handshake("PLAIN")).error_code == ErrorCode.none
    cid = sasl_client.send(api_versions_request())
    got, response = sasl_client.recv(response_class(18, 3))
    assert (got, response.error_code) == (cid, ErrorCode.illegal_sasl_state)
    assert sasl_client.is_closed_by_peer()


def test_oversized_sasl_frame_closes(sasl_client: RawClient) -> None:
    sasl_client.send_raw(struct.pack(">i", 524289) + b"\0" * 64)  # sasl.server.max.receive.size
    assert _closed_without_answer(sasl_client) >= DELAY_S * 0.9


def test_sasl_requests_on_a_plaintext_listener(secure_broker: EmbeddedBroker) -> None:
    with RawClient("127.0.0.1", secure_broker.listener_ports["PLAINTEXT"]) as client:
        assert client.request(_handshake("PLAIN")).error_code == ErrorCode.illegal_sasl_state
        response = client.request(_authenticate(b"x"))
        assert response.error_code == ErrorCode.illegal_sasl_state
        assert client.request(metadata_request([])).brokers  # and the connection serves on


def _tls_metadata(port: int, pki: Pki) -> Any:
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            client = RawClient.__new__(RawClient)
            client.sock, client.timeout, client._buffer = tls, 10.0, bytearray()
            client._correlation = iter(range(1, 100))
            return client.request(metadata_request([]))


def test_failed_tls_handshake_costs_one_log_line_and_that_connection(
    secure_broker: EmbeddedBroker, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    port = secure_broker.listener_ports["SSL"]
    caplog.set_level(logging.INFO, logger="kafkalite.server")
    with RawClient("127.0.0.1", port) as plaintext:
        plaintext.send(metadata_request([]))  # not TLS
        assert plaintext.is_closed_by_peer()
        local_port = plaintext.sock.getsockname()[1]
    lines = [r for r in caplog.records if f":{local_port}" in r.getMessage()]
    assert [r.getMessage().partition(": ")[0] for r in lines] == [
        f"Failed authentication with 127.0.0.1:{local_port} on SSL (SSL handshake failed"
    ]
    assert [b.port for b in _tls_metadata(port, pki).brokers] == [port]


def test_tls_handshake_has_a_timeout(pki: Pki) -> None:
    overrides = {**secure_overrides(pki), "kafkalite.authentication.timeout.ms": "300"}
    with EmbeddedBroker(overrides=overrides) as broker:
        port = broker.listener_ports["SSL"]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
            started = time.monotonic()
            silent.settimeout(10)
            assert silent.recv(1) == b""  # closed by the broker, not by our timeout
            assert 0.25 <= time.monotonic() - started < 5
        assert [b.port for b in _tls_metadata(port, pki).brokers] == [port]
        metrics = broker.broker.metrics  # Kafka's failed-/successful-authentication-total
        assert (metrics.failed_authentications, metrics.successful_authentications) == (1, 1)


def test_named_listeners_advertise_their_own_endpoints() -> None:
    """listener.security.protocol.map names the listeners; each client is told the advertised
    endpoint of the listener it came in on."""
    overrides = {
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "advertised.listeners": "INTERNAL://internal.example:0,EXTERNAL://external.example:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config": (
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_eve="pw";'
        ),
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        internal, external = broker.listener_ports["INTERNAL"], broker.listener_ports["EXTERNAL"]
        with RawClient("127.0.0.1", internal) as client:
            brokers = client.request(metadata_request([])).brokers
            assert [(b.host, b.port) for b in brokers] == [("internal.example", internal)]
        with RawClient("127.0.0.1", external) as client:
            client.send(metadata_request([]))
            assert _closed_without_answer(client) >= 0  # SASL first
        with RawClient("127.0.0.1", external) as client:
            assert client.request(_handshake("PLAIN")).error_code == ErrorCode.none
            assert client.request(_authenticate(_plain("eve", "pw"))).error_code == ErrorCode.none
            brokers = client.request(metadata_request([])).brokers
            assert [(b.host, b.port) for b in brokers] == [("external.example", external)]


def test_certificate_no_mapping_rule_matches_is_refused(pki: Pki) -> None:
    overrides = {
        **secure_overrides(pki),
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(admin),.*$/$1/",
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        port = broker.listener_ports["SSL"]
        context = ssl.create_default_context(cafile=str(pki.ca_file))
        context.load_cert_chain(pki.client_cert_file, pki.client_key_file)  # CN=client
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.settimeout(10)
                try:
                    closed = tls.recv(1) == b""
                except (ssl.SSLError, ConnectionResetError):
                    closed = True
                assert closed
        # without a certificate the principal is ANONYMOUS: no rule applies to it
        assert [b.port for b in _tls_metadata(port, pki).brokers] == [port]
