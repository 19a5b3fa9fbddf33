"""`kafkalite acl` and `kafkalite user` on a single node with ACLs and SASL_PLAINTEXT: the super
user `admin` (PLAIN) logs in with -X properties, allows alice to write a topic (her produce is
refused before, delivered after), lists and removes the ACL; creates a SCRAM user who then logs
in with SCRAM, lists and deletes it. Refusals are one line and exit 1."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from compat.cli_runner import kafkalite_here, ok, ok_json, one_line_error
from kafkalite.testing import EmbeddedBroker
from kafkalite.tools.acl import HEADERS
from tests.integration.console_helpers import ConsoleProcess
from tests.security.conftest import JAAS, PLAIN_USERS

TOPIC = "payments"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with EmbeddedBroker(overrides=overrides) as started:
        yield started


def login(user: str, password: str, mechanism: str = "PLAIN") -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def cli(broker: EmbeddedBroker, *args: str, user: str = "admin", stdin: str | None = None) -> Any:
    """`kafkalite ARGS` logged in as a PLAIN user with -X properties."""
    settings = [f"-X{key}={value}" for key, value in login(user, PLAIN_USERS[user]).items()]
    return kafkalite_here(*args, "-b", broker.bootstrap, "--timeout", "10", *settings, stdin=stdin)


def produce_as_alice(broker: EmbeddedBroker) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    conf = {"bootstrap.servers": broker.bootstrap, **login("alice", PLAIN_USERS["alice"])}
    producer = Producer(conf)
    producer.produce(TOPIC, b"hello", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(20) == 0
    return errors[0]


ALICE_WRITES = ["--allow-principal", "User:alice", "--operation", "Write", "--topic", TOPIC]


def test_acl_add_list_remove_decides_what_alice_may_produce(broker: EmbeddedBroker) -> None:
    ok(cli(broker, "topic", "create", TOPIC))
    refused = produce_as_alice(broker)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    added = ok_json(cli(broker, "acl", "add", *ALICE_WRITES, "--format", "json"))
    acl = {
        "principal": "User:alice",
        "host": "*",
        "operation": "Write",
        "permission": "ALLOW",
        "resource_type": "TOPIC",
        "name": TOPIC,
        "pattern_type": "LITERAL",
    }
    assert added == [acl]
    assert produce_as_alice(broker) is None

    assert ok_json(cli(broker, "acl", "list", "--format", "json")) == [acl]
    table = ok(cli(broker, "acl", "list", "--principal", "User:alice", "--topic", TOPIC))
    row = ["User:alice", "*", "Write", "ALLOW", "TOPIC", TOPIC, "LITERAL"]
    assert [line.split() for line in table.splitlines()] == [HEADERS, row]
    assert ok_json(cli(broker, "acl", "list", "--principal", "User:bob", "--format", "json")) == []

    removed = ok_json(cli(broker, "acl", "remove", "--topic", TOPIC, "--format", "json"))
    assert removed == [acl]
    assert ok_json(cli(broker, "acl", "list", "--format", "json")) == []
    refused = produce_as_alice(broker)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_add_by_a_user_without_alter_on_the_cluster_is_one_line(
    broker: EmbeddedBroker,
) -> None:
    result = cli(broker, "acl", "add", *ALICE_WRITES, user="alice")
    one_line_error(result, 1, "cannot add ACLs", "CLUSTER_AUTHORIZATION_FAILED")


def test_acl_on_a_broker_without_authorizer_is_one_line() -> None:
    with EmbeddedBroker() as plain:
        result = kafkalite_here("acl", "add", *ALICE_WRITES, "-b", plain.bootstrap)
    one_line_error(result, 1, "cannot add ACLs", "SECURITY_DISABLED")


def authenticates(broker: EmbeddedBroker, user: str, password: str, mechanism: str) -> bool:
    """Whether a metadata request succeeds, or librdkafka reports the authentication failed."""
    failures: list[KafkaError] = []
    conf = {"bootstrap.servers": broker.bootstrap, **login(user, password, mechanism)}
    admin = AdminClient({**conf, "error_cb": failures.append})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return True
        except KafkaException:
            admin.poll(0)  # serves error_cb
            if any(error.code() == KafkaError._AUTHENTICATION for error in failures):
                return False
    raise AssertionError(f"neither metadata nor an authentication failure: {failures}")


def test_user_set_password_list_delete(broker: EmbeddedBroker) -> None:
    created = ok_json(
        cli(
            broker,
            *("user", "set-password", "dave", "--mechanism", "SCRAM-SHA-512"),
            *("--iterations", "8192", "--format", "json"),
            stdin="dave-secret\n",
        )
    )
    assert created == {"user": "dave", "mechanism": "SCRAM-SHA-512", "iterations": 8192}
    assert authenticates(broker, "dave", "dave-secret", "SCRAM-SHA-512")
    assert not authenticates(broker, "dave", "wrong", "SCRAM-SHA-512")

    ok(cli(broker, "user", "set-password", "dave", "--password", "dave-256"))
    listed = ok_json(cli(broker, "user", "list", "--format", "json"))
    assert listed == {
        "dave": [
            {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
            {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
        ]
    }
    table = ok(cli(broker, "user", "list", "dave"))
    assert [line.split() for line in table.splitlines()] == [
        ["USER", "MECHANISM", "ITERATIONS"],
        ["dave", "SCRAM-SHA-256", "4096"],
        ["dave", "SCRAM-SHA-512", "8192"],
    ]

    deleted = ok_json(cli(broker, "user", "delete", "dave", "--format", "json"))
    assert deleted == {"user": "dave", "deleted": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}
    assert ok_json(cli(broker, "user", "list", "--format", "json")) == {}
    assert not authenticates(broker, "dave", "dave-secret", "SCRAM-SHA-512")


def test_user_errors_are_kafkas_per_user_errors_in_one_line(broker: EmbeddedBroker) -> None:
    one_line_error(cli(broker, "user", "list", "nobody"), 1, "nobody", "RESOURCE_NOT_FOUND")
    one_line_error(cli(broker, "user", "delete", "nobody"), 1, "nobody", "RESOURCE_NOT_FOUND")
    deleted = cli(broker, "user", "delete", "nobody", "--mechanism", "SCRAM-SHA-256")
    one_line_error(deleted, 1, "nobody", "RESOURCE_NOT_FOUND")
    too_few = ("--iterations", "100", "--password", "x")
    refused = cli(broker, "user", "set-password", "erin", *too_few)
    one_line_error(refused, 1, "erin", "UNACCEPTABLE_CREDENTIAL")


def test_prefixed_deny_and_cluster_acls_are_listed_by_match_and_removed_by_filter(
    broker: EmbeddedBroker,
) -> None:
    bob = ("--allow-principal", "User:bob", "--deny-principal", "User:eve")
    prefixed = ("--group", "bob-", "--resource-pattern-type", "prefixed")
    added = ok_json(
        cli(broker, "acl", "add", *bob, "--operation", "Read", *prefixed, "--format", "json")
    )
    assert [(a["principal"], a["permission"], a["pattern_type"]) for a in added] == [
        ("User:bob", "ALLOW", "PREFIXED"),
        ("User:eve", "DENY", "PREFIXED"),
    ]
    cluster = ok_json(
        cli(
            broker,
            *("acl", "add", "--allow-principal", "User:bob", "--operation", "idempotent-write"),
            *("--cluster", "--host", "10.0.0.1", "--format", "json"),
        )
    )
    assert [(a["resource_type"], a["name"], a["operation"], a["host"]) for a in cluster] == [
        ("CLUSTER", "kafka-cluster", "IdempotentWrite", "10.0.0.1")
    ]
    matching = ("--group", "bob-1", "--resource-pattern-type", "match", "--format", "json")
    assert len(ok_json(cli(broker, "acl", "list", *matching))) == 2
    assert ok_json(cli(broker, "acl", "list", "--cluster", "--format", "json")) == cluster

    removed = ok_json(cli(broker, "acl", "remove", "--deny-principal", "User:eve", *matching))
    assert [(a["principal"], a["permission"]) for a in removed] == [("User:eve", "DENY")]
    assert len(ok_json(cli(broker, "acl", "remove", *matching))) == 1
    assert len(ok_json(cli(broker, "acl", "remove", "--cluster", "--format", "json"))) == 1
    assert ok_json(cli(broker, "acl", "list", "--format", "json")) == []


def test_a_kafka_tools_command_config_file_logs_the_cli_in(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The same client.properties file Kafka's tools take (`--command-config`), PLAIN then
    SCRAM, logs `kafkalite` in; a wrong password is refused in one line."""
    admin = tmp_path / "admin.properties"
    admin.write_text(
        "# as for kafka-acls.sh --command-config\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="admin" password="{PLAIN_USERS["admin"]}";\n'
    )
    common = ("-b", broker.bootstrap, "--timeout", "10", "--command-config", str(admin))
    ok(kafkalite_here("user", "set-password", "carol", *common, stdin="carol-secret\n"))
    carol = tmp_path / "carol.properties"
    carol.write_text(
        "security.protocol: SASL_PLAINTEXT\n"
        "sasl.mechanism: SCRAM-SHA-256\n"
        "sasl.jaas.config: org.apache.kafka.common.security.scram.ScramLoginModule required"
        ' username="carol" password="carol-secret";\n'
    )
    as_carol = ("-b", broker.bootstrap, "--timeout", "10", "--command-config", str(carol))
    assert "__consumer_offsets" not in ok(kafkalite_here("topic", "list", *as_carol))
    carol.write_text(carol.read_text().replace("carol-secret", "wrong"))
    one_line_error(kafkalite_here("topic", "list", *as_carol), 1, "uthentication")
    ok(kafkalite_here("user", "delete", "carol", *common))


def test_the_console_logs_in_with_a_command_config_file(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    admin = tmp_path / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required"
        f' username="admin" password="{PLAIN_USERS["admin"]}";\n'
    )
    ok(cli(broker, "topic", "create", "console-sees-me"))
    with ConsoleProcess(broker.bootstrap, "--command-config", str(admin)) as console:
        with urllib.request.urlopen(f"{console.url}/api/topics", timeout=30) as answer:
            names = [t["name"] for t in json.loads(answer.read())]
    assert "console-sees-me" in names
