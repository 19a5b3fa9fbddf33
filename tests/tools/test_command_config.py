"""Kafka client properties files (`--command-config`) as librdkafka properties: what passes
through, what is translated, and what librdkafka cannot take (one line, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.cli_runner import kafkalite_here, one_line_error
from kafkalite.tools.command_config import (
    CommandConfigError,
    parse_properties,
    read_command_config,
    translate,
)

PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    ' username="admin" password="a \\"quoted\\" secret";'
)


def test_java_properties_syntax() -> None:
    text = "# comment\n! also\na=1\nb: 2\nc 3\nlong=first \\\n    second\n\nempty=\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "long": "first second",
        "empty": "",
    }


def test_sasl_and_tls_are_translated() -> None:
    java = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "ssl.truststore.password": "unused",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/etc/kafka/me.p12",
        "ssl.keystore.password": "ks",
        "ssl.endpoint.identification.algorithm": "",
        "ssl.enabled.protocols": "TLSv1.3",
        "client.id": "ops",
    }
    assert translate(java, "f") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": 'a "quoted" secret',
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.keystore.location": "/etc/kafka/me.p12",
        "ssl.keystore.password": "ks",
        "ssl.endpoint.identification.algorithm": "none",
        "client.id": "ops",
    }
    pem_keystore = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"}
    assert translate(pem_keystore, "f") == {
        "ssl.certificate.location": "/k.pem",
        "ssl.key.location": "/k.pem",
    }


@pytest.mark.parametrize(
    ("java", "message"),
    [
        ({"ssl.truststore.location": "/t.jks"}, "ssl.truststore.type JKS"),
        ({"ssl.keystore.location": "/k.jks"}, "ssl.keystore.type JKS"),
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
            "PlainLoginModule and ScramLoginModule",
        ),
        ({"sasl.jaas.config": 'x.PlainLoginModule required username="u";'}, "password"),
    ],
)
def test_what_librdkafka_cannot_take_is_a_usage_error(java: dict[str, str], message: str) -> None:
    with pytest.raises(CommandConfigError, match=message):
        translate(java, "f")


def test_a_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(CommandConfigError, match="cannot read command config"):
        read_command_config(missing)
    result = kafkalite_here("topic", "list", "--command-config", str(missing))
    one_line_error(result, 2, "cannot read command config")
