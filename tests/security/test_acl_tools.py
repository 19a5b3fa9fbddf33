"""Kafka's own `kafka-acls` (4.3, compat/kafka_tools.py) against kafkalite's authorizer, as an
admin over SASL_PLAINTEXT (PLAIN) with a `--command-config` file: add a PREFIXED ALLOW and a
host's DENY, list them (two JVM runs: removal is covered by test_acl_clients)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.kafka_tools import ToolRun, run_tool
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.testing import EmbeddedBroker
from tests.security.conftest import PLAIN_USERS

pytestmark = pytest.mark.slow  # a JVM per tool run

ADMIN_LOGIN = (
    "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    f' username="admin" password="{PLAIN_USERS["admin"]}";\n'
)


def kafka_acls(broker: EmbeddedBroker, folder: Path, *args: str) -> ToolRun:
    settings = folder / "admin.properties"
    settings.write_text(ADMIN_LOGIN)
    return run_tool("kafka-acls", broker.bootstrap, "--command-config", str(settings), *args)


def test_kafka_acls_add_and_list(acl_broker: EmbeddedBroker, tmp_path: Path) -> None:
    added = kafka_acls(
        acl_broker,
        tmp_path,
        "--add",
        "--allow-principal",
        "User:bob",
        "--deny-principal",
        "User:bob",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "Read",
        "--topic",
        "bob-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert added.exit_code == 0, added.stderr
    listed = kafka_acls(acl_broker, tmp_path, "--list", "--principal", "User:bob")
    assert listed.exit_code == 0, listed.stderr
    assert "name=bob-, patternType=PREFIXED" in listed.stdout
    lines = [line.strip() for line in listed.stdout.splitlines() if "principal=User:bob" in line]
    assert sorted(lines) == [
        "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:bob, host=10.0.0.9, operation=READ, permissionType=DENY)",
    ]
    assert (
        acl_broker.broker.authorizer.authorize(  # the DENY holds for its host only
            KafkaPrincipal("User", "bob"),
            "10.0.0.9",
            AclOperation.READ,
            ResourceType.TOPIC,
            "bob-1",
        )
        is False
    )
