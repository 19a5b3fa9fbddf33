"""confluent-kafka (librdkafka) over every security protocol of one broker: produce and
consume over SSL, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL; SCRAM
users managed with the admin API; a wrong password refused; Metadata advertises the
listener the client connected to."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkalite.testing import EmbeddedBroker
from tests.security.conftest import PLAIN_USERS, SCRAM_USERS, Pki

MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


@pytest.fixture(scope="module")
def scram_users(secure_broker: EmbeddedBroker) -> dict[str, tuple[str, str]]:
    """Each SCRAM user created over the PLAINTEXT listener with AlterUserScramCredentials."""
    admin = AdminClient({"bootstrap.servers": secure_broker.bootstrap_of("PLAINTEXT")})
    upsertions = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(MECHANISMS[m], 4096), pw.encode())
        for m, (user, pw) in SCRAM_USERS.items()
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(timeout=10)
    return SCRAM_USERS


def _settings(
    broker: EmbeddedBroker, pki: Pki, listener: str, mechanism: str | None
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap_of(listener),
        "security.protocol": listener,
    }
    if listener.endswith("SSL"):
        settings["ssl.ca.location"] = str(pki.ca_file)
    if mechanism == "OAUTHBEARER":  # librdkafka's own unsecured JWT, as Kafka's docs set it up
        settings.update(
            {
                "sasl.mechanism": mechanism,
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=alice scope=kafka",
            }
        )
    elif mechanism is not None:
        user, password = (
            ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else SCRAM_USERS[mechanism]
        )
        settings.update(
            {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
        )
    return settings


def _round_trip(settings: dict[str, Any], topic: str) -> list[bytes]:
    producer = Producer(settings)
    for i in range(3):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer(
        {**settings, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_PLAINTEXT", "OAUTHBEARER"),
        ("SASL_SSL", "OAUTHBEARER"),
    ],
)
def test_produce_and_consume(
    secure_broker: EmbeddedBroker,
    pki: Pki,
    scram_users: object,
    listener: str,
    mechanism: str | None,
) -> None:
    topic = f"secure-{listener.lower()}-{uuid.uuid4().hex[:8]}"
    secure_broker.create_topic(topic)
    values = _round_trip(_settings(secure_broker, pki, listener, mechanism), topic)
    assert values == [b"record-0", b"record-1", b"record-2"]


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"])
def test_metadata_advertises_the_listener_connected_to(
    secure_broker: EmbeddedBroker, pki: Pki, listener: str
) -> None:
    mechanism = "PLAIN" if listener.startswith("SASL") else None
    producer = Producer(_settings(secure_broker, pki, listener, mechanism))
    brokers = producer.list_topics(timeout=10).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [
        ("127.0.0.1", secure_broker.listener_ports[listener])
    ]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_an_authentication_error(
    secure_broker: EmbeddedBroker, pki: Pki, scram_users: object, mechanism: str
) -> None:
    errors: list[KafkaError] = []
    settings = _settings(secure_broker, pki, "SASL_PLAINTEXT", mechanism)
    producer = Producer({**settings, "sasl.password": "wrong", "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    if mechanism == "PLAIN":
        assert "Invalid username or password" in errors[0].str()
    else:  # Kafka's generic message: it does not say whether the user exists
        assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in errors[0].str()


def test_oauthbearer_token_without_the_required_scope(
    secure_broker: EmbeddedBroker, pki: Pki
) -> None:
    """The JSON error challenge, librdkafka's %x01 reply, then SASL_AUTHENTICATION_FAILED
    carrying the challenge."""
    errors: list[KafkaError] = []
    settings = _settings(secure_broker, pki, "SASL_PLAINTEXT", "OAUTHBEARER")
    settings["sasl.oauthbearer.config"] = "principal=alice scope=other"
    producer = Producer({**settings, "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert '{"status":"insufficient_scope", "scope":"[kafka]"}' in errors[0].str()


def test_scram_user_admin(secure_broker: EmbeddedBroker, pki: Pki, scram_users: object) -> None:
    """Describe shows mechanisms and iterations; a deleted credential is gone."""
    admin = AdminClient(_settings(secure_broker, pki, "SASL_PLAINTEXT", "PLAIN"))
    user = f"dave-{uuid.uuid4().hex[:6]}"
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"dave-secret"
    )
    admin.alter_user_scram_credentials([upsert])[user].result(timeout=10)
    described = admin.describe_user_scram_credentials([user])[user].result(timeout=10)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])[user].result(timeout=10)
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials([user])[user].result(timeout=10)
