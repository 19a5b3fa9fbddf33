"""ACLs with a stock client (confluent-kafka/librdkafka) on a SASL_PLAINTEXT (PLAIN) listener:
the super user manages ACLs with the AdminClient (create_acls, describe_acls, delete_acls);
alice, without them, gets TOPIC_AUTHORIZATION_FAILED on produce and consume and sees no
topic in Metadata; with them she produces, consumes and sees only her topic."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafkalite.testing import EmbeddedBroker
from tests.security.conftest import PLAIN_USERS

TOPIC, SECRET, GROUP_PREFIX = "orders", "secret", "alice-"


def settings(broker: EmbeddedBroker, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PLAIN_USERS[user],
    }


def alice_acl(operation: AclOperation, name: str = TOPIC, kind: Any = None) -> AclBinding:
    return AclBinding(
        kind or ResourceType.TOPIC,
        name,
        ResourcePatternType.PREFIXED if kind == ResourceType.GROUP else ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def produce(broker: EmbeddedBroker) -> KafkaError | None:
    """Produce one record as alice: the delivery error, or None."""
    errors: list[KafkaError | None] = []
    producer = Producer(settings(broker, "alice"))
    producer.produce(TOPIC, b"hello", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(20) == 0
    return errors[0]


def consume(broker: EmbeddedBroker) -> bytes | KafkaError:
    """Consume as alice in a group she may use: the first value, or the first error."""
    group = f"{GROUP_PREFIX}{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {**settings(broker, "alice"), "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                return message.error() or message.value()
    finally:
        consumer.close()
    raise AssertionError("neither a record nor an error within 20 s")


def test_acls_decide_what_alice_may_do(acl_broker: EmbeddedBroker) -> None:
    admin = AdminClient(settings(acl_broker, "admin"))
    for future in admin.create_topics([NewTopic(TOPIC, 1), NewTopic(SECRET, 1)]).values():
        future.result(timeout=10)
    group_read = alice_acl(AclOperation.READ, GROUP_PREFIX, ResourceType.GROUP)
    admin.create_acls([group_read])[group_read].result(timeout=10)

    alice = AdminClient(settings(acl_broker, "alice"))
    assert set(alice.list_topics(timeout=10).topics) == set()  # Metadata hides both
    with pytest.raises(KafkaException) as refused:
        alice.create_acls([alice_acl(AclOperation.ALL)])[alice_acl(AclOperation.ALL)].result(10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    produced = produce(acl_broker)
    assert produced is not None and produced.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumed = consume(acl_broker)
    assert isinstance(consumed, KafkaError)
    assert consumed.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    grants = [alice_acl(AclOperation.WRITE), alice_acl(AclOperation.READ)]
    for future in admin.create_acls(grants).values():
        future.result(timeout=10)
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    described = admin.describe_acls(everything).result(timeout=10)
    assert sorted((b.name, b.operation.name) for b in described) == [
        (GROUP_PREFIX, "READ"),
        (TOPIC, "READ"),
        (TOPIC, "WRITE"),
    ]

    assert produce(acl_broker) is None
    assert consume(acl_broker) == b"hello"
    assert set(alice.list_topics(timeout=10).topics) == {TOPIC}  # not SECRET

    write_only = AclBindingFilter(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.MATCH,
        "User:alice",
        None,
        AclOperation.WRITE,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([write_only])[write_only].result(timeout=10)
    assert [(b.name, b.operation.name) for b in deleted] == [(TOPIC, "WRITE")]
    produced = produce(acl_broker)
    assert produced is not None and produced.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
