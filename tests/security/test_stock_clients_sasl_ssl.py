"""Stock clients over SASL_SSL (SCRAM) on one node with ACLs: kcat (librdkafka's CLI)
produces and consumes with SCRAM-SHA-512 and is refused with a wrong password; Apache
Kafka's Java producer and consumer (tests/security/java/JavaSaslSslClient.java) produce and
consume with SCRAM-SHA-256 and get TopicAuthorizationException for a topic without an ACL.

Users and ACLs are set up over the PLAINTEXT listener, whose ANONYMOUS principal is the
super user (as Kafka's documentation sets up a PLAINTEXT inter-broker listener)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AclOperation, ScramMechanism

from kafkalite.testing import EmbeddedBroker
from tests.conftest import make_topic_name
from tests.security.conftest import Pki
from tests.security.scram_acl_broker import allow, scram_acl_broker

USERS = {
    "kate": (ScramMechanism.SCRAM_SHA_512, "kate-secret"),
    "jack": (ScramMechanism.SCRAM_SHA_256, "jack-secret"),
}
JAVA_CLIENT = "tests/security/java/JavaSaslSslClient.java"
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    with scram_acl_broker(pki.keystore_file, USERS) as running:
        yield running


def _kcat(broker: EmbeddedBroker, pki: Pki, password: str, *args: str, **run: Any) -> Any:
    command = ["kcat", "-b", broker.bootstrap_of("SASL_SSL"), *args]
    for setting in (
        "security.protocol=SASL_SSL",
        "sasl.mechanisms=SCRAM-SHA-512",
        "sasl.username=kate",
        f"sasl.password={password}",
        f"ssl.ca.location={pki.ca_file}",
    ):
        command += ["-X", setting]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, **run)


@pytest.fixture(scope="module")
def kcat() -> None:
    if shutil.which("kcat") is None:
        pytest.skip("no kcat (scripts/install_kcat.sh installs it)")


@pytest.mark.usefixtures("kcat")
def test_kcat_produces_and_consumes_over_sasl_ssl(broker: EmbeddedBroker, pki: Pki) -> None:
    topic = broker.create_topic(make_topic_name("kcat-sasl-ssl"))
    allow(broker, "kate", topic, AclOperation.WRITE, AclOperation.READ)
    password = USERS["kate"][1]
    lines = [f"kcat-{i}" for i in range(5)]
    produced = _kcat(broker, pki, password, "-P", "-t", topic, "-p", "0", input="\n".join(lines))
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat(broker, pki, password, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines


@pytest.mark.usefixtures("kcat")
def test_kcat_with_a_wrong_password_is_refused(broker: EmbeddedBroker, pki: Pki) -> None:
    listed = _kcat(broker, pki, "not-kates-password", "-L", "-m", "2")
    assert listed.returncode == 1
    assert "SASL authentication error: Authentication failed" in listed.stderr, listed.stderr


def test_java_client_over_sasl_ssl_and_denied_a_topic_without_acl(
    broker: EmbeddedBroker, pki: Pki
) -> None:
    from compat.kafka_dist import kafka_lib
    from compat.kafka_tools import SHORT_RUN_JVM

    if shutil.which("java") is None:
        pytest.skip("no java")
    allowed = broker.create_topic(make_topic_name("java-allowed"))
    denied = broker.create_topic(make_topic_name("java-denied"))
    allow(broker, "jack", allowed, AclOperation.WRITE, AclOperation.READ)
    command = ["java", *SHORT_RUN_JVM, "-cp", f"{kafka_lib()}/*", JAVA_CLIENT]
    command.append(broker.bootstrap_of("SASL_SSL"))
    command += [str(pki.ca_file), "jack", USERS["jack"][1], allowed, denied, "5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    assert "consumed 5" in out, done.stdout + done.stderr
    assert "denied org.apache.kafka.common.errors.TopicAuthorizationException" in out, done.stdout
