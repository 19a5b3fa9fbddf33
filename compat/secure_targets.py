"""A secured broker pair for compat/test_security*.py: kafkalite and Apache Kafka 4.4 with
the same SASL_SSL listener, certificates, SCRAM users and authorizer.

    target = start_secure_target("kafka", tmp_dir)      # (SecureTarget, process)
    AdminClient(target.client_config("alice"))          # SCRAM-SHA-256 over TLS as alice

Both brokers get `secure_overrides()`: one SASL_SSL listener (clients see only it) with
SCRAM-SHA-256 and SCRAM-SHA-512, the broker's PEM keystore from a `trustme` CA (key in PKCS#8,
as Kafka's PEM keystore wants it; SANs localhost and 127.0.0.1, as librdkafka verifies host
names), StandardAuthorizer with `super.users=User:admin`, and no ACL means no access.

The users of `USERS` exist before the broker starts, as an operator bootstraps them:
- Kafka (KRaft): `kafka-storage format --add-scram 'SCRAM-SHA-256=[name=...,password=...]'`
  for each user (compat/kafka_server.py's `format_arguments`); the broker logs in to its own
  SASL_SSL listener as `admin` (inter-broker), while its KRaft CONTROLLER listener stays
  PLAINTEXT on 127.0.0.1, so `User:ANONYMOUS` is a super user on Kafka only (the broker's
  registration and heartbeats to its controller arrive as ANONYMOUS; no client uses it).
- kafkalite (one node): the same credentials (salted and hashed as Kafka stores them) written
  into its metadata file before the first start, as `--add-scram` writes them into Kafka's
  bootstrap metadata.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.kafka_server import KafkaServer
from compat.targets import COMMON_DEFAULTS

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
ITERATIONS = 4096  # Kafka's --add-scram default
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # what clients trust
    keystore: Path  # the broker's PKCS#8 key followed by its certificate chain


@dataclass(frozen=True)
class SecureTarget:
    name: str  # "kafkalite" or "kafka"
    bootstrap: str  # the SASL_SSL listener, "127.0.0.1:port"
    ca_file: Path

    def client_config(
        self,
        user: str,
        password: str | None = None,
        mechanism: str = "SCRAM-SHA-256",
    ) -> dict[str, Any]:
        """librdkafka's settings to log in as `user` (its password from USERS by default)."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca_file),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": USERS[user] if password is None else password,
        }


def write_certificates(folder: Path) -> Certificates:
    import trustme
    from cryptography.hazmat.primitives import serialization

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    certs = Certificates(folder / "ca.pem", folder / "broker.pem")
    certs.keystore.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    ca.cert_pem.write_to_path(str(certs.ca))
    return certs


def secure_overrides(certs: Certificates) -> dict[str, str]:
    """The security settings both brokers take, with Kafka's names."""
    admin_login = f'{SCRAM_LOGIN} username="admin" password="{USERS["admin"]}";'
    return {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": admin_login,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": admin_login,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.keystore),
        "ssl.truststore.type": "PEM",  # the broker's own client (inter-broker) trusts the CA
        "ssl.truststore.location": str(certs.ca),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }


class SecureKafkaServer(KafkaServer):
    """compat/kafka_server.py's KRaft node on SASL_SSL, its users added at format time."""

    def __init__(self, data_dir: Path, overrides: Mapping[str, str], ca_file: Path) -> None:
        super().__init__(data_dir, overrides)
        self.ca_file = ca_file
        self.format_arguments = [
            argument
            for user, password in USERS.items()
            for argument in ("--add-scram", f"SCRAM-SHA-256=[name={user},password={password}]")
        ]

    def properties(self) -> dict[str, str]:
        listener = f"SASL_SSL://{self.host}:{self.port}"
        return {
            **super().properties(),
            "listeners": f"{listener},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": listener,
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            **self.overrides,
            "super.users": self.overrides.get("super.users", "") + ";User:ANONYMOUS",
        }

    def client_config(self) -> dict[str, Any]:
        return SecureTarget("kafka", self.bootstrap, self.ca_file).client_config("admin")


def write_kafkalite_users(log_dir: Path) -> None:
    """USERS' SCRAM-SHA-256 credentials in a fresh kafkalite node's metadata file."""
    from kafkalite.broker.metadata_store import METADATA_FILE
    from kafkalite.security.scram_credential import SCRAM_SHA_256, ScramCredential

    credentials = {
        user: {
            SCRAM_SHA_256.name: ScramCredential.from_password(
                SCRAM_SHA_256, password, os.urandom(16), ITERATIONS
            ).to_string()
        }
        for user, password in USERS.items()
    }
    log_dir.mkdir(parents=True, exist_ok=True)
    metadata = {"next_producer_id": 0, "topics": [], "scram_credentials": credentials}
    (log_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=1))


def start_secure_target(
    name: str, data_dir: Path, overrides: Mapping[str, str] | None = None, timeout: float = 120.0
) -> tuple[SecureTarget, Any]:
    """Start a secured broker; returns the SecureTarget and the process (`stop()` ends it)."""
    certs = write_certificates(data_dir / "pki")
    settings = {**COMMON_DEFAULTS, **secure_overrides(certs), **(overrides or {})}
    if name == "kafkalite":
        from kafkalite.testing import BrokerProcess

        write_kafkalite_users(data_dir / "kafkalite")
        settings["listeners"] = "SASL_SSL://127.0.0.1:0"
        settings["security.inter.broker.protocol"] = "SASL_SSL"
        process: Any = BrokerProcess(data_dir / "kafkalite", settings).start(timeout=timeout)
    elif name == "kafka":
        process = SecureKafkaServer(data_dir / "kafka", settings, certs.ca).start(timeout=timeout)
    else:
        raise ValueError(f"unknown target {name!r}")
    return SecureTarget(name, process.bootstrap, certs.ca), process
