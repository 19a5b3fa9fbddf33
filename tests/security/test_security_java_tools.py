"""The Java client, through Kafka's own tools (4.3, compat/kafka_tools.py) with a
`--command-config` file: SASL_SSL with PLAIN and SCRAM and a PEM truststore (hostname
verified); a SCRAM user with both mechanisms created with `kafka-configs`, then logging in."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.kafka_tools import ToolRun, run_tool
from kafkalite.testing import EmbeddedBroker
from tests.security.conftest import Pki

pytestmark = pytest.mark.slow  # a JVM per tool run


def _tool(
    broker: EmbeddedBroker, pki: Pki, folder: Path, login: str, tool: str, *args: str
) -> ToolRun:
    settings = folder / f"{tool}.properties"
    settings.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_file}\n{login}\n"
    )
    bootstrap = broker.bootstrap_of("SASL_SSL")
    return run_tool(tool, bootstrap, "--command-config", str(settings), *args)


def _scram(mechanism: str, user: str, password: str) -> str:
    return (
        f"sasl.mechanism={mechanism}\nsasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{user}" password="{password}";'
    )


PLAIN_ADMIN = (
    "sasl.mechanism=PLAIN\nsasl.jaas.config="
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    ' username="admin" password="admin-secret";'
)


def test_java_client_over_sasl_ssl(secure_broker: EmbeddedBroker, pki: Pki, tmp_path: Path) -> None:
    topic = secure_broker.create_topic("java-sasl-ssl")
    created = _tool(
        secure_broker,
        pki,
        tmp_path,
        PLAIN_ADMIN,
        "kafka-configs",
        "--alter",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=zed-secret],SCRAM-SHA-512=[password=zed-secret]",
        "--entity-type",
        "users",
        "--entity-name",
        "zed",
    )
    assert created.exit_code == 0, created.stderr
    listed = _tool(
        secure_broker,
        pki,
        tmp_path,
        _scram("SCRAM-SHA-512", "zed", "zed-secret"),
        "kafka-topics",
        "--list",
    )
    assert listed.exit_code == 0, listed.stderr
    assert topic in listed.stdout.split()
