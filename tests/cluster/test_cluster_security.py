"""Security in a 3-broker ZooKeeper cluster, with stock clients (confluent-kafka): ACLs live in
ZooKeeper's /kafka-acl and SCRAM credentials in /config/users, in Kafka's layout, so what is
written through one broker holds on every other.

Brokers talk to each other on a SASL_SSL listener (security.inter.broker.protocol), in TLS
and logged in with PLAIN as User:broker, which needs ClusterAction on the cluster (Kafka's
rule) and is no super user; clients log in on a SASL_PLAINTEXT listener (PLAIN for the super
user `admin`, SCRAM-SHA-256 for `alice`, created through broker 1). An ACL created through
broker 2 lets alice write to a topic led by broker 3, where she was refused before; her
acks=all produce then succeeds with the followers in the ISR: they fetched over SASL_SSL as
User:broker. A client quota set through broker 1 lands in ZooKeeper's /config/users and is
described by broker 3.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from cluster_helpers import StartBrokers, poll, zk_read
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.alter_client_quotas.v1 import request as alter_quotas
from kio.schema.describe_client_quotas.v1 import request as describe_quotas
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64, i8

from kafkalite.broker.broker_connection import BrokerConnection
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.security.inter_broker import InterBrokerSecurity
from kafkalite.security.sasl_client import SaslLogin
from tests.security.conftest import Pki, pki  # noqa: F401 (the fixture: certificates)

TOPIC = "orders"
PLAIN_JAAS = (  # the broker's own login, and the PLAIN users it accepts
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    ' username="broker" password="broker-secret"'
    ' user_broker="broker-secret" user_admin="admin-secret";'
)


def secure(certificates: Pki) -> dict[str, str]:
    return {
        "listeners": (
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
        ),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.keystore_file),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certificates.ca_file),
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }


BROKERS_REPLICATE = AclBinding(  # the principal of inter-broker traffic
    ResourceType.BROKER,
    "kafka-cluster",
    ResourcePatternType.LITERAL,
    "User:broker",
    "*",
    AclOperation.CLUSTER_ACTION,
    AclPermissionType.ALLOW,
)
ALICE_WRITES = AclBinding(
    ResourceType.TOPIC,
    TOPIC,
    ResourcePatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.WRITE,
    AclPermissionType.ALLOW,
)
EVERY_ACL = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def sasl_endpoints(zk_connect: str) -> dict[int, str]:
    """Each broker's SASL_PLAINTEXT endpoint, from its registration in ZooKeeper."""

    async def read(kafka_zk: KafkaZkClient) -> dict[int, str]:
        brokers = await kafka_zk.live_brokers()
        return {
            broker_id: f"{e.host}:{e.port}"
            for broker_id, info in brokers.items()
            for e in info.endpoints
            if e.listener == "SASL_PLAINTEXT"
        }

    return zk_read(zk_connect, read)


def login(bootstrap: str, user: str, password: str, mechanism: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def admin_on(bootstrap: str) -> AdminClient:
    return AdminClient(login(bootstrap, "admin", "admin-secret", "PLAIN"))


def alice_on(bootstrap: str) -> dict[str, Any]:
    return login(bootstrap, "alice", "alice-secret", "SCRAM-SHA-256")


def alice_logs_in(bootstrap: str) -> bool:
    try:
        AdminClient(alice_on(bootstrap)).list_topics(timeout=5)
    except KafkaException as exc:
        assert exc.args[0].code() in (
            KafkaError._AUTHENTICATION,
            KafkaError.SASL_AUTHENTICATION_FAILED,
            KafkaError._TRANSPORT,
        ), exc
        return False
    return True


def ask_as_admin(address: str, request: Any) -> Any:
    """One request over SASL_PLAINTEXT as the super user (confluent-kafka has no quota APIs)."""
    host, _, port = address.rpartition(":")
    admin = InterBrokerSecurity(login=SaslLogin("PLAIN", "admin", "admin-secret"))

    async def exchange() -> Any:
        with trio.fail_after(10):
            connection = await BrokerConnection.open(host, int(port), "tests", admin)
            try:
                return await connection.request(request)
            finally:
                await connection.aclose()

    return trio.run(exchange)


ALICE_QUOTA = alter_quotas.AlterClientQuotasRequest(
    entries=(
        alter_quotas.EntryData(
            entity=(alter_quotas.EntityData(entity_type="user", entity_name="alice"),),
            ops=(
                alter_quotas.OpData(key="producer_byte_rate", value=f64(1048576.0), remove=False),
            ),
        ),
    ),
    validate_only=False,
)
ALICE_QUOTAS = describe_quotas.DescribeClientQuotasRequest(
    components=(
        describe_quotas.ComponentData(entity_type="user", match_type=i8(0), match="alice"),
    ),
    strict=False,
)


def alice_quotas(address: str) -> list[tuple[str, float]]:
    answer = ask_as_admin(address, ALICE_QUOTAS)
    assert answer.error_code == ErrorCode.none, answer.error_message
    return [(v.key, float(v.value)) for entry in answer.entries for v in entry.values]


def produce_as_alice(bootstrap: str) -> KafkaError | None:
    """One record, acks=all, bootstrapped on `bootstrap`: the delivery error, or None."""
    errors: list[KafkaError | None] = []
    producer = Producer({**alice_on(bootstrap), "acks": "all", "message.timeout.ms": 10000})
    producer.produce(TOPIC, b"hello", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(20) == 0
    return errors[0]


def test_acls_and_scram_users_hold_on_every_broker(
    start_brokers: StartBrokers, zk_connect: str, request: pytest.FixtureRequest
) -> None:
    start_brokers(secure(request.getfixturevalue("pki")))
    sasl = sasl_endpoints(zk_connect)
    admin_a, admin_b, admin_c = (admin_on(sasl[broker_id]) for broker_id in (1, 2, 3))

    admin_b.create_acls([BROKERS_REPLICATE])[BROKERS_REPLICATE].result(timeout=10)
    for admin in (admin_a, admin_c):  # brokers 1 and 3 follow /kafka-acl-changes
        poll(
            lambda a=admin: len(a.describe_acls(EVERY_ACL).result(timeout=10)) == 1,
            "the ClusterAction ACL on every broker",
        )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    alice = UserScramCredentialUpsertion("alice", info, b"alice-secret")
    admin_a.alter_user_scram_credentials([alice])["alice"].result(timeout=10)
    znode = zk_read(zk_connect, lambda kafka_zk: kafka_zk.zk.get("/config/users/alice"))
    stored = json.loads(znode[0])
    assert list(stored["config"]) == ["SCRAM-SHA-256"]
    assert stored["config"]["SCRAM-SHA-256"].endswith(",iterations=4096")
    poll(lambda: alice_logs_in(sasl[3]), "alice logs in on broker 3")
    described = admin_c.describe_user_scram_credentials(["alice"])["alice"].result(timeout=10)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]

    assignment = NewTopic(TOPIC, 1, replica_assignment=[[3, 1, 2]])  # led by broker 3
    admin_c.create_topics([assignment])[TOPIC].result(timeout=10)
    refused = produce_as_alice(sasl[3])
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    admin_b.create_acls([ALICE_WRITES])[ALICE_WRITES].result(timeout=10)
    poll(lambda: produce_as_alice(sasl[3]) is None, "alice's acks=all produce on broker 3")
    # Within message.timeout.ms (10 s), well below replica.lag.time.max.ms (30 s): the
    # followers fetched it over SASL_SSL, logged in as User:broker whom ClusterAction lets
    # fetch, and stay in the ISR.
    partition = admin_c.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    assert (partition.leader, sorted(partition.isrs)) == (3, [1, 2, 3])

    (entry,) = ask_as_admin(sasl[1], ALICE_QUOTA).entries
    assert entry.error_code == ErrorCode.none, entry.error_message
    znode = zk_read(zk_connect, lambda kafka_zk: kafka_zk.zk.get("/config/users/alice"))
    assert json.loads(znode[0])["config"]["producer_byte_rate"] == "1048576"  # beside SCRAM
    poll(lambda: alice_quotas(sasl[3]) == [("producer_byte_rate", 1048576.0)], "on broker 3")
