"""The inter-broker listener and the broker's own SASL login (config.inter_broker_listener,
security/sasl_client.py): Kafka's config checks, and the client side of PLAIN and SCRAM
against the broker's own SASL servers."""

from __future__ import annotations

import pytest

from kafkalite.config import BrokerConfig, ConfigError, build_config
from kafkalite.security.plain import PlainServer
from kafkalite.security.sasl_client import SaslClientError, SaslLogin, inter_broker_login
from kafkalite.security.sasl_server import SaslServer
from kafkalite.security.scram import ScramServer
from kafkalite.security.scram_credential import SCRAM_SHA_512, ScramCredential

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
    with pytest.raises(ConfigError, match="over PLAINTEXT or SASL_PLAINTEXT only"):
        build_config(
            {
                **TWO_LISTENERS,
                "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
                "security.inter.broker.protocol": "SSL",
            }
        )


def test_the_brokers_own_login() -> None:
    assert inter_broker_login(config()) is None  # PLAINTEXT
    sasl = {"inter.broker.listener.name": "SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match="log in to each other with PLAIN"):
        inter_broker_login(build_config({**TWO_LISTENERS, **sasl}))  # GSSAPI, Kafka's default
    plain = build_config({**TWO_LISTENERS, **sasl, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert inter_broker_login(plain) == SaslLogin("PLAIN", "broker", "broker-secret")
    not_enabled = {**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms"):
        inter_broker_login(build_config({**TWO_LISTENERS, **not_enabled}))
    scram = {**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match="scram-sha-512.sasl.jaas.config"):
        inter_broker_login(build_config({**TWO_LISTENERS, **scram}))
    single_node = {k: v for k, v in TWO_LISTENERS.items() if k != "zookeeper.connect"}
    assert inter_broker_login(build_config({**single_node, **sasl})) is None  # no other broker


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
