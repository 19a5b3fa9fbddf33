"""Security as clients see it, on kafkalite and Apache Kafka 4.4 with the same SASL_SSL
listener, SCRAM users and StandardAuthorizer (compat/secure_targets.py; `admin` is the super
user, `alice` and `bob` have only the ACLs a test gives them): authentication, the ACL APIs
and their filters, the errors of a principal without the ACL, Metadata hiding topics, the
authorized operations of KIP-430, SCRAM credentials and client quotas. Every name a test
creates (topics, groups, transactional ids, users) is its own, so tests share the brokers.
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.alter_client_quotas.v1 import request as alter_quotas
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_client_quotas.v1 import request as describe_quotas
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.static.primitive import f64, i8

from compat.scenario_helpers import CLIENT_TIMEOUT, wait_until
from compat.secure_targets import USERS, SecureTarget
from kafkalite.broker.broker_connection import BrokerConnection
from kafkalite.security.inter_broker import InterBrokerSecurity
from kafkalite.security.sasl_client import SaslLogin

_ADMINS: dict[str, AdminClient] = {}


@pytest.fixture(autouse=True, scope="module")
def _admins_closed() -> Iterator[None]:
    yield
    _ADMINS.clear()


def admin_of(target: SecureTarget) -> AdminClient:
    """The super user's AdminClient, one per target, kept for the module."""
    if target.bootstrap not in _ADMINS:
        client = AdminClient(target.client_config("admin"))
        client.list_topics(timeout=CLIENT_TIMEOUT)
        _ADMINS[target.bootstrap] = client
    return _ADMINS[target.bootstrap]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(target: SecureTarget, name: str) -> None:
    admin = admin_of(target)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(CLIENT_TIMEOUT)
    wait_until(
        lambda: (
            name in admin.list_topics(name, timeout=CLIENT_TIMEOUT).topics
            and not admin.list_topics(name, timeout=CLIENT_TIMEOUT).topics[name].error
        ),
        timeout=CLIENT_TIMEOUT,
        message=f"{name} in the metadata",
    )


def allow(
    target: SecureTarget,
    user: str,
    resource: ResourceType,
    name: str,
    *operations: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> None:
    """ALLOW ACLs for `User:<user>` from any host; waits until the broker applies them
    (Kafka applies them from its metadata log after answering)."""
    bindings = [
        AclBinding(resource, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)
        for op in operations
    ]
    admin = admin_of(target)
    for future in admin.create_acls(bindings).values():
        future.result(CLIENT_TIMEOUT)
    wanted = acl_rows(bindings)
    exact = AclBindingFilter(
        resource, name, pattern, f"User:{user}", "*", AclOperation.ANY, AclPermissionType.ALLOW
    )
    wait_until(
        lambda: set(wanted) <= set(acl_rows(admin.describe_acls(exact).result(CLIENT_TIMEOUT))),
        timeout=CLIENT_TIMEOUT,
        message=f"the ACLs of {user} on {name} applied",
    )


def error_name(future: Any) -> str:
    try:
        future.result(CLIENT_TIMEOUT)
    except KafkaException as exc:
        return exc.args[0].name()
    return "NONE"


def acl_rows(bindings: list[AclBinding]) -> list[tuple[str, str, str, str, str, str, str]]:
    return sorted(
        (
            b.restype.name,
            b.name,
            b.resource_pattern_type.name,
            b.principal,
            b.host,
            b.operation.name,
            b.permission_type.name,
        )
        for b in bindings
    )


def first_client_error(client: Producer | Consumer, errors: list[KafkaError]) -> KafkaError:
    deadline = time.monotonic() + CLIENT_TIMEOUT
    while not errors and time.monotonic() < deadline:
        client.poll(0.1)
    assert errors, "no error reported"
    return errors[0]


# -- authentication --------------------------------------------------------------------------


def test_scram_login_with_the_right_password(secure_target: SecureTarget) -> None:
    client = AdminClient(secure_target.client_config("alice"))
    metadata = client.list_topics(timeout=CLIENT_TIMEOUT)
    assert len(metadata.brokers) == 1
    assert metadata.topics == {}  # alice may describe no topic


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_login_is_refused_with_kafkas_error(
    secure_target: SecureTarget, mechanism: str
) -> None:
    """A wrong password, and a mechanism the user has no credential for (alice has only
    SCRAM-SHA-256), both answer SASL_AUTHENTICATION_FAILED with Kafka's message."""
    password = "wrong" if mechanism == "SCRAM-SHA-256" else None
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **secure_target.client_config("alice", password, mechanism),
            "error_cb": errors.append,
            "reconnect.backoff.ms": 1000,
        }
    )
    error = first_client_error(producer, errors)
    assert error.code() == KafkaError._AUTHENTICATION
    assert (
        "SASL authentication error: Authentication failed during authentication due to"
        f" invalid credentials with SASL mechanism {mechanism} (after" in error.str()
    ), error.str()


# -- ACL APIs --------------------------------------------------------------------------------


def test_create_describe_and_delete_acls_with_literal_prefixed_and_match_filters(
    secure_target: SecureTarget,
) -> None:
    admin = admin_of(secure_target)
    prefix = unique("acl")
    topic = f"{prefix}-orders"
    allow(secure_target, "alice", ResourceType.TOPIC, topic, AclOperation.READ)
    allow(
        secure_target,
        "alice",
        ResourceType.TOPIC,
        f"{prefix}-",
        AclOperation.WRITE,
        pattern=ResourcePatternType.PREFIXED,
    )
    deny = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:bob",
        "10.0.0.1",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    admin.create_acls([deny])[deny].result(CLIENT_TIMEOUT)

    def described(name: str | None, pattern: ResourcePatternType) -> list[tuple[str, ...]]:
        flt = AclBindingFilter(
            ResourceType.TOPIC,
            name,
            pattern,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        return acl_rows(admin.describe_acls(flt).result(CLIENT_TIMEOUT))

    literal_read = ("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW")
    bob_deny = ("TOPIC", topic, "LITERAL", "User:bob", "10.0.0.1", "ALL", "DENY")
    prefixed_write = ("TOPIC", f"{prefix}-", "PREFIXED", "User:alice", "*", "WRITE", "ALLOW")
    assert described(topic, ResourcePatternType.LITERAL) == [literal_read, bob_deny]
    assert described(topic, ResourcePatternType.PREFIXED) == []
    assert described(f"{prefix}-", ResourcePatternType.PREFIXED) == [prefixed_write]
    assert described(topic, ResourcePatternType.MATCH) == sorted(
        [literal_read, bob_deny, prefixed_write]
    )
    assert described(topic, ResourcePatternType.ANY) == [literal_read, bob_deny]

    # DeleteAcls with a MATCH filter for alice: both of hers go, bob's DENY stays.
    flt = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.MATCH,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([flt])[flt].result(CLIENT_TIMEOUT)
    assert acl_rows(deleted) == sorted([literal_read, prefixed_write])
    assert described(topic, ResourcePatternType.MATCH) == [bob_deny]


def test_acl_apis_need_alter_and_describe_on_the_cluster(secure_target: SecureTarget) -> None:
    bob = AdminClient(secure_target.client_config("bob"))
    binding = AclBinding(
        ResourceType.TOPIC,
        unique("t"),
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    flt = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert {
        "create": error_name(bob.create_acls([binding])[binding]),
        "describe": error_name(bob.describe_acls(flt)),  # librdkafka drops its error code
        "delete": error_name(bob.delete_acls([flt])[flt]),
    } == {
        "create": "CLUSTER_AUTHORIZATION_FAILED",
        "describe": "NONE",
        "delete": "CLUSTER_AUTHORIZATION_FAILED",
    }
    request = DescribeAclsRequest(
        resource_type_filter=i8(1),  # ANY
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )
    answer = _ask(secure_target, "bob", request)
    assert (answer.error_code.name, answer.resources) == ("cluster_authorization_failed", ())


# -- a principal without the ACL ---------------------------------------------------------------


def test_produce_without_write_fails_with_topic_authorization_failed(
    secure_target: SecureTarget,
) -> None:
    topic = unique("no-write")
    create_topic(secure_target, topic)
    allow(secure_target, "bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    reports: list[KafkaError | None] = []
    producer = Producer({**secure_target.client_config("bob"), "message.timeout.ms": 15000})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(CLIENT_TIMEOUT)
    assert [err.name() if err else None for err in reports] == ["TOPIC_AUTHORIZATION_FAILED"]


def test_idempotent_produce_without_write_fails_with_cluster_authorization_failed(
    secure_target: SecureTarget,
) -> None:
    """InitProducerId of an idempotent producer needs IdempotentWrite on the cluster or
    Write on some topic (KIP-679); bob has neither, and librdkafka makes that fatal."""
    topic = unique("no-write-idem")
    create_topic(secure_target, topic)
    allow(secure_target, "bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    reports: list[KafkaError | None] = []
    producer = Producer(
        {
            **secure_target.client_config("bob"),
            "enable.idempotence": True,
            "message.timeout.ms": 10000,
        }
    )
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    raised: list[KafkaError] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT
    while not raised and not reports and time.monotonic() < deadline:
        try:
            producer.poll(0.2)
        except KafkaException as exc:
            raised.append(exc.args[0])
    seen = [(e.name(), e.fatal()) for e in raised] + [
        (e.name(), e.fatal()) for e in reports if e is not None
    ]
    assert seen == [("CLUSTER_AUTHORIZATION_FAILED", True)], seen


def test_consume_without_read_fails_with_group_or_topic_authorization_failed(
    secure_target: SecureTarget,
) -> None:
    topic = unique("no-read")
    group = unique("g")
    create_topic(secure_target, topic)
    allow(secure_target, "bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    conf = {
        **secure_target.client_config("bob"),
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    # (librdkafka looks the group's coordinator up even in assign mode: with neither ACL,
    # which error comes first is a race in the client, so the group is allowed here.)
    allow(secure_target, "bob", ResourceType.GROUP, group, AclOperation.READ)
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert _poll_error(consumer).name() == "TOPIC_AUTHORIZATION_FAILED"
    finally:
        consumer.close()
    # With Read on the topic but not on another group, subscribing fails on the group.
    allow(secure_target, "bob", ResourceType.TOPIC, topic, AclOperation.READ)
    consumer = Consumer({**conf, "group.id": unique("g")})
    try:
        consumer.subscribe([topic])
        assert _poll_error(consumer).name() == "GROUP_AUTHORIZATION_FAILED"
    finally:
        consumer.close()


def _poll_error(consumer: Consumer) -> KafkaError:
    deadline = time.monotonic() + CLIENT_TIMEOUT
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is not None, f"consumed offset {message.offset()}"
            return message.error()
    raise AssertionError("no error within the deadline")


def test_with_the_acls_a_principal_produces_and_consumes_in_a_group(
    secure_target: SecureTarget,
) -> None:
    topic, group = unique("granted"), unique("g")
    create_topic(secure_target, topic)
    allow(secure_target, "alice", ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.WRITE)
    allow(secure_target, "alice", ResourceType.GROUP, group, AclOperation.READ)
    reports: list[KafkaError | None] = []
    producer = Producer(secure_target.client_config("alice"))
    for i in range(3):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(CLIENT_TIMEOUT)
    assert reports == [None, None, None]
    consumer = Consumer(
        {
            **secure_target.client_config("alice"),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
        assert values == [b"v0", b"v1", b"v2"]
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=CLIENT_TIMEOUT)
        assert [tp.offset for tp in committed] == [3]
    finally:
        consumer.close()


def test_admin_operations_without_acls(secure_target: SecureTarget) -> None:
    """Create, describe, delete a topic, its configs and the broker's, a group: Kafka's errors
    for bob, who has no ACL; ListGroups lists none of the groups he may not describe."""
    topic, group = unique("admin-ops"), unique("g")
    create_topic(secure_target, topic)
    bob = AdminClient(secure_target.client_config("bob"))
    new = unique("bob-new")
    errors = {
        "create_topics": error_name(bob.create_topics([NewTopic(new, 1, 1)])[new]),
        "describe_topics": error_name(bob.describe_topics(TopicCollection([topic]))[topic]),
        "delete_topics": error_name(bob.delete_topics([topic])[topic]),
        "describe_topic_configs": error_name(
            bob.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])[
                ConfigResource(ResourceType.TOPIC, topic)
            ]
        ),
        "describe_group": error_name(bob.describe_consumer_groups([group])[group]),
        "delete_group": error_name(bob.delete_consumer_groups([group])[group]),
    }
    assert errors == {
        "create_topics": "TOPIC_AUTHORIZATION_FAILED",
        "describe_topics": "TOPIC_AUTHORIZATION_FAILED",
        "delete_topics": "TOPIC_AUTHORIZATION_FAILED",
        "describe_topic_configs": "TOPIC_AUTHORIZATION_FAILED",
        "describe_group": "GROUP_AUTHORIZATION_FAILED",
        "delete_group": "GROUP_AUTHORIZATION_FAILED",
    }
    assert topic in admin_of(secure_target).list_topics(timeout=CLIENT_TIMEOUT).topics
    listed = bob.list_consumer_groups().result(CLIENT_TIMEOUT)
    assert listed.valid == [] and listed.errors == []


def test_transactions_without_the_transactional_id_acl(secure_target: SecureTarget) -> None:
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **secure_target.client_config("bob"),
            "transactional.id": unique("txn"),
            "error_cb": errors.append,
        }
    )
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(CLIENT_TIMEOUT)
    assert raised.value.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


def test_transactions_with_the_transactional_id_acl(secure_target: SecureTarget) -> None:
    topic, txn = unique("txn-topic"), unique("txn")
    create_topic(secure_target, topic)
    allow(secure_target, "alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
    allow(
        secure_target,
        "alice",
        ResourceType.TRANSACTIONAL_ID,
        txn,
        AclOperation.WRITE,
    )
    producer = Producer({**secure_target.client_config("alice"), "transactional.id": txn})
    producer.init_transactions(CLIENT_TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"in-a-transaction")
    producer.commit_transaction(CLIENT_TIMEOUT)


# -- Metadata and authorized operations (KIP-430) --------------------------------------------


def test_metadata_lists_only_the_topics_a_principal_may_describe(
    secure_target: SecureTarget,
) -> None:
    visible, hidden = unique("visible"), unique("hidden")
    create_topic(secure_target, visible)
    create_topic(secure_target, hidden)
    allow(secure_target, "alice", ResourceType.TOPIC, visible, AclOperation.READ)
    alice = AdminClient(secure_target.client_config("alice"))
    listed = alice.list_topics(timeout=CLIENT_TIMEOUT).topics
    assert visible in listed and hidden not in listed
    asked = alice.list_topics(hidden, timeout=CLIENT_TIMEOUT).topics[hidden]
    assert asked.error is not None and asked.error.name() == "TOPIC_AUTHORIZATION_FAILED"
    asked = alice.list_topics(visible, timeout=CLIENT_TIMEOUT).topics[visible]
    assert asked.error is None and len(asked.partitions) == 1


def test_a_deny_wins_over_an_allow_and_hides_the_topic(secure_target: SecureTarget) -> None:
    topic = unique("denied")
    create_topic(secure_target, topic)
    allow(secure_target, "alice", ResourceType.TOPIC, topic, AclOperation.READ)
    deny = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.DENY,
    )
    admin_of(secure_target).create_acls([deny])[deny].result(CLIENT_TIMEOUT)
    alice = AdminClient(secure_target.client_config("alice"))
    assert topic not in alice.list_topics(timeout=CLIENT_TIMEOUT).topics
    asked = alice.list_topics(topic, timeout=CLIENT_TIMEOUT).topics[topic]
    assert asked.error is not None and asked.error.name() == "TOPIC_AUTHORIZATION_FAILED"


def test_authorized_operations_of_a_topic(secure_target: SecureTarget) -> None:
    topic = unique("ops")
    create_topic(secure_target, topic)
    allow(
        secure_target,
        "alice",
        ResourceType.TOPIC,
        topic,
        AclOperation.READ,
        AclOperation.ALTER_CONFIGS,
    )
    alice = AdminClient(secure_target.client_config("alice"))
    described = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(CLIENT_TIMEOUT)
    assert sorted(op.name for op in described.authorized_operations) == [
        "ALTER_CONFIGS",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "READ",
    ]
    described = (
        admin_of(secure_target)
        .describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic]
        .result(CLIENT_TIMEOUT)
    )
    assert sorted(op.name for op in described.authorized_operations) == [
        "ALTER",
        "ALTER_CONFIGS",
        "CREATE",
        "DELETE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "READ",
        "WRITE",
    ]


def test_authorized_operations_of_the_cluster(secure_target: SecureTarget) -> None:
    def cluster_operations(client: AdminClient) -> list[str]:
        described = client.describe_cluster(include_authorized_operations=True)
        operations = described.result(CLIENT_TIMEOUT).authorized_operations
        return sorted(op.name for op in operations or ())  # None: no operation

    assert cluster_operations(AdminClient(secure_target.client_config("bob"))) == []
    assert cluster_operations(admin_of(secure_target)) == [
        "ALTER",
        "ALTER_CONFIGS",
        "CLUSTER_ACTION",
        "CREATE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "IDEMPOTENT_WRITE",
    ]


# -- SCRAM credentials -------------------------------------------------------------------------


def test_alter_and_describe_user_scram_credentials(secure_target: SecureTarget) -> None:
    admin = admin_of(secure_target)
    user = unique("carol")
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret"
    )
    assert error_name(admin.alter_user_scram_credentials([upsert])[user]) == "NONE"
    # Kafka applies a change from its metadata log after answering: wait for each one.
    wait_until(
        lambda: error_name(admin.describe_user_scram_credentials([user])[user]) == "NONE",
        timeout=CLIENT_TIMEOUT,
        message=f"{user} described",
    )
    described = admin.describe_user_scram_credentials([user])[user].result(CLIENT_TIMEOUT)
    assert [(i.mechanism.name, i.iterations) for i in described.scram_credential_infos] == [
        ("SCRAM_SHA_512", 8192)
    ]
    config = {
        **secure_target.client_config("alice", "carol-secret", "SCRAM-SHA-512"),
        "sasl.username": user,
    }
    wait_until(lambda: _logs_in(config), timeout=CLIENT_TIMEOUT, message=f"{user} logs in")

    too_few = UserScramCredentialUpsertion(
        unique("dave"), ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
    )
    assert (
        error_name(admin.alter_user_scram_credentials([too_few])[too_few.user])
        == "UNACCEPTABLE_CREDENTIAL"
    )
    missing = unique("nobody")
    assert (
        error_name(admin.describe_user_scram_credentials([missing])[missing])
        == "RESOURCE_NOT_FOUND"
    )
    delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    assert error_name(admin.alter_user_scram_credentials([delete])[user]) == "NONE"
    wait_until(
        lambda: (
            error_name(admin.describe_user_scram_credentials([user])[user]) == "RESOURCE_NOT_FOUND"
        ),
        timeout=CLIENT_TIMEOUT,
        message=f"{user} gone",
    )
    # (librdkafka 2.16 aborts the process on a top-level error of this answer: raw here.)
    request = DescribeUserScramCredentialsRequest(users=(UserName(name=user),))
    denied = _ask(secure_target, "bob", request)
    assert (denied.error_code.name, denied.error_message) == ("cluster_authorization_failed", None)
    assert [(r.user, r.error_code.name, r.error_message) for r in denied.results] == [
        ("", "cluster_authorization_failed", None)
    ]


def _logs_in(config: dict[str, Any]) -> bool:
    client = AdminClient({**config, "reconnect.backoff.ms": 1000})
    try:
        client.list_topics(timeout=3)
    except KafkaException:
        return False
    return True


# -- client quotas (DescribeClientQuotas, AlterClientQuotas: not in confluent-kafka) ----------


def _ask(target: SecureTarget, login: str, request: Any) -> Any:
    """One request on kafkalite's own client connection, in TLS, logged in as `login`."""
    host, _, port = target.bootstrap.rpartition(":")
    context = ssl.create_default_context(cafile=str(target.ca_file))
    security = InterBrokerSecurity(context, SaslLogin("SCRAM-SHA-256", login, USERS[login]))

    async def exchange() -> Any:
        with trio.fail_after(CLIENT_TIMEOUT):
            connection = await BrokerConnection.open(host, int(port), "compat", security)
            try:
                return await connection.request(request)
            finally:
                await connection.aclose()

    return trio.run(exchange)


def _describe_user_quotas(target: SecureTarget, login: str, user: str) -> Any:
    component = describe_quotas.ComponentData(entity_type="user", match_type=i8(0), match=user)
    request = describe_quotas.DescribeClientQuotasRequest(components=(component,), strict=False)
    return _ask(target, login, request)


def test_alter_and_describe_client_quotas(secure_target: SecureTarget) -> None:
    user = unique("quota-user")
    entity = alter_quotas.EntityData(entity_type="user", entity_name=user)
    ops = (
        alter_quotas.OpData(key="producer_byte_rate", value=f64(1024.0), remove=False),
        alter_quotas.OpData(key="consumer_byte_rate", value=f64(2048.0), remove=False),
    )
    request = alter_quotas.AlterClientQuotasRequest(
        entries=(alter_quotas.EntryData(entity=(entity,), ops=ops),), validate_only=False
    )
    answer = _ask(secure_target, "admin", request)
    assert [(e.error_code.name, e.error_message) for e in answer.entries] == [("none", None)]

    def quotas() -> list[tuple[str, float]]:
        answer = _describe_user_quotas(secure_target, "admin", user)
        assert answer.error_code.name == "none", answer
        return sorted((v.key, float(v.value)) for e in answer.entries for v in e.values)

    wait_until(
        lambda: quotas() == [("consumer_byte_rate", 2048.0), ("producer_byte_rate", 1024.0)],
        timeout=CLIENT_TIMEOUT,
        message="the quotas described",
    )
    denied = _ask(secure_target, "bob", request)
    assert [e.error_code.name for e in denied.entries] == ["cluster_authorization_failed"]
    denied = _describe_user_quotas(secure_target, "bob", user)
    assert denied.error_code.name == "cluster_authorization_failed"
