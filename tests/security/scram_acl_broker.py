"""A one-node broker for stock-client tests over SASL_SSL: a PLAINTEXT listener whose
ANONYMOUS principal is the super user (users and ACLs are set up there, as Kafka's
documentation sets up a PLAINTEXT inter-broker listener) and a SASL_SSL listener with
SCRAM-SHA-256/512 and an ACL authorizer."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafkalite.testing import EmbeddedBroker

Users = Mapping[str, tuple[ScramMechanism, str]]  # user -> (mechanism, password)


@contextmanager
def scram_acl_broker(keystore: Path, users: Users) -> Iterator[EmbeddedBroker]:
    """The broker (its PEM keystore: key and certificate chain) with `users` created."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
        "connection.failed.authentication.delay.ms": "100",
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_of("PLAINTEXT")})
        upsertions = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), pw.encode())
            for user, (mechanism, pw) in users.items()
        ]
        for future in admin.alter_user_scram_credentials(upsertions).values():
            future.result(timeout=10)
        yield broker


def allow(broker: EmbeddedBroker, user: str, topic: str, *operations: AclOperation) -> None:
    """ALLOW `operations` on the topic (literal) to User:`user`, from any host."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_of("PLAINTEXT")})
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in operations
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=10)
