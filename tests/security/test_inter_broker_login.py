"""The inter-broker listener and how a broker connects to the others (config.inter_broker_listener,
security/inter_broker.py, security/sasl_client.py): Kafka's config checks, the client side of
PLAIN and SCRAM against the broker's own SASL servers, and a BrokerConnection in TLS and
logged in on a SASL_SSL listener."""

from __future__ import annotations

import pytest
import trio
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from kafkalite.broker.broker_connection import AuthenticationFailed, BrokerConnection
from kafkalite.config import BrokerConfig, ConfigError, build_config
from kafkalite.security.inter_broker import InterBrokerSecurity, inter_broker_security
from kafkalite.security.plain import PlainServer
from kafkalite.security.sasl_client import SaslClientError, SaslLogin
from kafkalite.security.sasl_server import SaslServer
from kafkalite.security.scram import ScramServer
from kafkalite.security.scram_credential import SCRAM_SHA_512, ScramCredential
from kafkalite.testing import EmbeddedBroker
from tests.security.conftest import PLAIN_USERS, Pki, secure_overrides

TWO_LISTENERS = {
    "zookeeper.connect": "127.0.0.1:2181",
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="broker" password="broker-secret" user_broker="broker-secret";'
    ),
}


def config(**overrides: str) -> BrokerConfig:
    return build_config({**TWO_LISTENERS, **{k.replace("_", "."): v for k, v in overrides.items()}})


def test_the_inter_broker_listener() -> None:
    assert config().inter_broker_listener == "PLAINTEXT"  # the first advertised listener
    by_protocol = config(security_inter_broker_protocol="SASL_PLAINTEXT")
    assert by_protocol.inter_broker_listener == "SASL_PLAINTEXT"
    assert (
        build_config(
            {**TWO_LISTENERS, "inter.broker.listener.name": "sasl_plaintext"}
        ).inter_broker_listener
        == "SASL_PLAINTEXT"
    )
    with pytest.raises(ConfigError, match="Only one of inter.broker.listener.name"):
        build_config(
            {
                **TWO_LISTENERS,
                "inter.broker.listener.name": "SASL_PLAINTEXT",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
            }
        )
    with pytest.raises(ConfigError, match="must be a listener name defined in advertised"):
        build_config({**TWO_LISTENERS, "inter.broker.listener.name": "INTERNAL"})


def login_of(overrides: dict[str, str]) -> SaslLogin | None:
    security = inter_broker_security(build_config({**TWO_LISTENERS, **overrides}))
    return security.login if security is not None else None


def test_the_brokers_own_login() -> None:
    assert inter_broker_security(config()) is None  # PLAINTEXT
    sasl = {"inter.broker.listener.name": "SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match="log in to each other with PLAIN"):
        login_of(sasl)  # GSSAPI, Kafka's default
    plain = {**sasl, "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    assert login_of(plain) == SaslLogin("PLAIN", "broker", "broker-secret")
    not_enabled = {**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms"):
        login_of(not_enabled)
    scram = {**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match="scram-sha-512.sasl.jaas.config"):
        login_of(scram)
    single_node = {k: v for k, v in TWO_LISTENERS.items() if k != "zookeeper.connect"}
    assert inter_broker_security(build_config({**single_node, **sasl})) is None  # alone


def exchange(login: SaslLogin, server: SaslServer) -> None:
    """The tokens back and forth, as BrokerConnection.authenticate sends them."""
    client = login.client()
    token: bytes | None = client.first()
    while token is not None:
        token = client.respond(server.evaluate_response(token))
    assert server.complete and server.authorization_id == login.username


def test_plain_and_scram_logins_against_the_brokers_servers() -> None:
    exchange(SaslLogin("PLAIN", "broker", "pw"), PlainServer({"broker": "pw"}))
    stored = ScramCredential.from_password(SCRAM_SHA_512, "pw", b"0123456789abcdef", 4096)

    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return stored if (user, mechanism) == ("broker", "SCRAM-SHA-512") else None

    exchange(SaslLogin("SCRAM-SHA-512", "broker", "pw"), ScramServer("SCRAM-SHA-512", lookup))

    client = SaslLogin("SCRAM-SHA-512", "broker", "pw").client()
    server = ScramServer("SCRAM-SHA-512", lookup)
    final = client.respond(server.evaluate_response(client.first()))
    assert final is not None
    server.evaluate_response(final)
    with pytest.raises(SaslClientError, match="SCRAM"):  # a server that does not know the key
        client.respond(b"v=" + b"A" * 88)


def test_a_connection_in_tls_logged_in_on_a_sasl_ssl_listener(pki: Pki) -> None:
    """What a broker's fetcher does on a SASL_SSL inter-broker listener, against a broker
    serving one: the certificate and host name checked, then the PLAIN login."""
    overrides = {
        **secure_overrides(pki),
        "zookeeper.connect": "127.0.0.1:2181",  # read as a cluster member's config
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
    }
    security = inter_broker_security(build_config(overrides))
    assert security is not None and security.ssl_context is not None
    assert security.login == SaslLogin("PLAIN", "admin", PLAIN_USERS["admin"])
    wrong = InterBrokerSecurity(security.ssl_context, SaslLogin("PLAIN", "admin", "wrong"))

    async def connect(port: int, with_security: InterBrokerSecurity) -> ErrorCode:
        connection = await BrokerConnection.open("localhost", port, "broker-2", with_security)
        try:
            return (await connection.request(ApiVersionsRequest())).error_code
        finally:
            await connection.aclose()

    with EmbeddedBroker(overrides=secure_overrides(pki)) as broker:
        port = int(broker.bootstrap_of("SASL_SSL").rpartition(":")[2])
        assert trio.run(connect, port, security) == ErrorCode.none
        with pytest.raises(AuthenticationFailed, match="SASL_AUTHENTICATION_FAILED"):
            trio.run(connect, port, wrong)
        plaintext_port = int(broker.bootstrap_of("PLAINTEXT").rpartition(":")[2])
        with pytest.raises(AuthenticationFailed, match="TLS handshake"):
            trio.run(connect, plaintext_port, security)
