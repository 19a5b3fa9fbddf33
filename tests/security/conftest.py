"""A broker with all four security protocols, for the tests of this folder.

Listeners PLAINTEXT, SASL_PLAINTEXT, SSL and SASL_SSL on free ports of one in-process
broker; a `trustme` CA signs the broker's certificate (SANs localhost and 127.0.0.1, as
librdkafka verifies hostnames) and a client certificate. PLAIN users come from the listeners'
JAAS configs; SCRAM users are created through AlterUserScramCredentials.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from kafkalite.testing import EmbeddedBroker

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    ' username="admin" password="admin-secret"'
    + "".join(f' user_{user}="{password}"' for user, password in PLAIN_USERS.items())
    + ";"
)
# OAUTHBEARER's unsecured JWS validator; tokens must carry the `kafka` scope.
OAUTHBEARER_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
    ' unsecuredValidatorRequiredScope="kafka";'
)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_USERS = {"SCRAM-SHA-256": ("bob", "bob-secret"), "SCRAM-SHA-512": ("carol", "carol-secret")}
FAILED_AUTH_DELAY_MS = 300


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    keystore_file: Path  # the broker's key and chain (PEM)
    client_cert_file: Path
    client_key_file: Path


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert(
        "client.example",
        common_name="client",
        organization_name="Acme, Inc.",
        organization_unit_name="eng",
    )
    pki = Pki(
        folder / "ca.pem", folder / "broker.pem", folder / "client.pem", folder / "client.key"
    )
    ca.cert_pem.write_to_path(str(pki.ca_file))
    server.private_key_and_cert_chain_pem.write_to_path(str(pki.keystore_file))
    client.cert_chain_pems[0].write_to_path(str(pki.client_cert_file))
    client.private_key_pem.write_to_path(str(pki.client_key_file))
    return pki


def secure_overrides(pki: Pki) -> dict[str, str]:
    return {
        "listeners": ",".join(
            f"{name}://127.0.0.1:0" for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
        ),
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore_file),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "listener.name.ssl.ssl.client.auth": "requested",
        "connection.failed.authentication.delay.ms": str(FAILED_AUTH_DELAY_MS),
    }


@pytest.fixture(scope="module")
def secure_broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(overrides=secure_overrides(pki)) as broker:
        yield broker


@pytest.fixture(scope="module")
def acl_broker() -> Iterator[EmbeddedBroker]:
    """A broker with ACLs on a SASL_PLAINTEXT (PLAIN) listener; `admin` is the super user."""
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        yield broker
