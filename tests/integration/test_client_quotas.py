"""Client quotas end to end on a single node: `kafkalite quota` sets, lists and removes them;
a confluent-kafka producer over its producer_byte_rate gets answers with throttle_time_ms > 0
(KIP-219); Kafka's own `kafka-configs.sh` (4.3) alters and describes them, defaults
included."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from compat.cli_runner import kafkalite_here, ok, ok_json, one_line_error
from compat.kafka_tools import run_tool
from kafkalite.testing import EmbeddedBroker
from protocol_tests.raw_client import (
    ConnectionClosed,
    RawClient,
    api_versions_request,
    build,
    metadata_request,
    produce_request,
    response_class,
)
from tests.apis.harness import record_batch

THROTTLED_CLIENT = "throttled-producer"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as started:
        yield started


def cli(broker: EmbeddedBroker, *args: str) -> object:
    return kafkalite_here(*args, "-b", broker.bootstrap, "--timeout", "10")


def test_quota_set_list_remove(broker: EmbeddedBroker) -> None:
    ok(cli(broker, "quota", "set", "--user", "alice", "--producer-byte-rate", "1048576"))
    ok(
        cli(
            broker,
            "quota",
            "set",
            "--user-default",
            "--client-id",
            "app",
            "--consumer-byte-rate",
            "2048",
        )
    )
    listed = ok_json(cli(broker, "quota", "list", "--user", "alice", "--format", "json"))
    assert listed == [{"entity": {"user": "alice"}, "quotas": {"producer_byte_rate": 1048576}}]
    table = ok(cli(broker, "quota", "list", "--client-id", "app"))
    assert "client-id=app user=<default>  consumer_byte_rate  2048" in table
    removed = ok_json(cli(broker, "quota", "remove", "--user", "alice", "--format", "json"))
    assert removed == {"entity": {"user": "alice"}, "removed": ["producer_byte_rate"]}
    assert (
        ok_json(cli(broker, "quota", "list", "--user", "alice", "--strict", "--format", "json"))
        == []
    )
    one_line_error(cli(broker, "quota", "remove", "--user", "alice"), 1, "has no quotas")
    ok(cli(broker, "quota", "remove", "--user-default", "--client-id", "app"))


def test_producer_over_its_quota_is_throttled(broker: EmbeddedBroker) -> None:
    # 1000 B/s: a first request of ~10.5 KB is over it (10 windows of 1 s at least, KIP-219)
    ok(cli(broker, "quota", "set", "--client-id", THROTTLED_CLIENT, "--producer-byte-rate", "1000"))
    topic = broker.create_topic("throttled")
    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": THROTTLED_CLIENT,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    try:
        producer.produce(topic, b"x" * 10_400)
        assert producer.flush(20) == 0
        deadline_polls = 50
        while not throttles and deadline_polls:
            producer.poll(0.1)
            deadline_polls -= 1
    finally:
        ok(cli(broker, "quota", "remove", "--client-id", THROTTLED_CLIENT))
    assert len(throttles) == 1 and throttles[0] > 0, throttles


def test_a_throttled_connection_is_muted(broker: EmbeddedBroker) -> None:
    """After a throttled answer the broker serves nothing on that connection for the
    throttle time: a request sent right behind it waits (KIP-219)."""
    ok(cli(broker, "quota", "set", "--client-id", "kafkalite-raw", "--producer-byte-rate", "1000"))
    topic = broker.create_topic("muted")
    try:
        with RawClient(broker.host, broker.port) as client:
            # ~11 KB against 1000 B/s over 10 windows: a throttle of about 1.1 s
            client.send(produce_request(topic, 0, record_batch([b"m" * 11_000]), acks=1))
            client.send(api_versions_request())
            _, produced = client.recv(response_class(0, 9))
            assert produced.throttle_time.total_seconds() > 1.0
            assert not client.readable_within(0.5)  # muted: the ApiVersions waits
            _, versions = client.recv(response_class(18, 3), timeout=10)
            assert versions.error_code == 0
    finally:
        ok(cli(broker, "quota", "remove", "--client-id", "kafkalite-raw"))


def test_topic_mutations_over_the_quota_answer_throttling_quota_exceeded(
    broker: EmbeddedBroker,
) -> None:
    ok(
        cli(
            broker,
            "quota",
            "set",
            "--client-id",
            "kafkalite-raw",
            "--controller-mutation-rate",
            "1",
        )
    )
    topics = tuple(
        build(
            19,
            7,
            "CreatableTopic",
            name=name,
            num_partitions=count,
            replication_factor=-1,
            assignments=(),
            configs=(),
        )
        for name, count in (("burst", 12), ("refused", 1))
    )
    request = build(
        19,
        7,
        "CreateTopicsRequest",
        topics=topics,
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    try:
        with RawClient(broker.host, broker.port) as client:
            response = client.request(request)
    finally:
        ok(cli(broker, "quota", "remove", "--client-id", "kafkalite-raw"))
    errors = {topic.name: topic.error_code for topic in response.topics}
    assert errors == {"burst": ErrorCode.none, "refused": ErrorCode.throttling_quota_exceeded}
    assert response.throttle_time.total_seconds() > 0  # set by the server (KIP-219)


def test_request_percentage_throttles_any_request(broker: EmbeddedBroker) -> None:
    # a quota no handler time fits in: the answer says to wait, at most a quota window (1 s)
    ok(cli(broker, "quota", "set", "--client-id", "kafkalite-raw", "--request-percentage", "1e-6"))
    try:
        with RawClient(broker.host, broker.port) as client:
            response = client.request(metadata_request([]))
    finally:
        ok(cli(broker, "quota", "remove", "--client-id", "kafkalite-raw"))
    assert 0 < response.throttle_time.total_seconds() <= 1.0


def test_connections_over_the_ip_quota_are_held_then_closed(broker: EmbeddedBroker) -> None:
    ok(cli(broker, "quota", "set", "--ip", "127.0.0.1", "--connection-creation-rate", "1"))
    clients = []
    try:
        # 1 a second over at least 10 windows of 1 s: the 11th connection at once is over
        for _ in range(11):
            clients.append(RawClient(broker.host, broker.port))
        answered = [c.request(api_versions_request()).error_code for c in clients[:10]]
        assert answered == [ErrorCode.none] * 10
        over = clients[-1]
        over.send(api_versions_request())
        assert over.is_closed_by_peer(timeout=10)
        assert not over._buffer  # never answered
        # removed on a connection already served: a new one would be throttled for seconds
        assert _remove_ip_quota(clients[0]) == ErrorCode.none
    finally:
        for client in clients:
            client.close()


def test_an_ip_quota_holds_back_only_its_own_address(broker: EmbeddedBroker) -> None:
    ok(cli(broker, "quota", "set", "--ip", "127.0.0.2", "--connection-creation-rate", "1"))
    noisy: list[RawClient] = []
    try:
        for _ in range(11):  # 1 a second over at least 10 windows: the 11th is over
            noisy.append(RawClient(broker.host, broker.port, source="127.0.0.2"))
        over = noisy[-1]
        over.send(api_versions_request())
        assert over.is_closed_by_peer(timeout=10)
        assert not over._buffer  # never answered
        # 127.0.0.1 has no quota: its new connections are served meanwhile
        for _ in range(20):
            with RawClient(broker.host, broker.port) as other:
                assert other.request(api_versions_request()).error_code == ErrorCode.none
        answered = [c.request(api_versions_request()).error_code for c in noisy[:10]]
        assert answered == [ErrorCode.none] * 10
        assert _remove_ip_quota(noisy[0], "127.0.0.2") == ErrorCode.none
    finally:
        for client in noisy:
            client.close()


def _remove_ip_quota(client: RawClient, ip: str = "127.0.0.1") -> ErrorCode:
    entity = build(49, 1, "EntityData", entity_type="ip", entity_name=ip)
    op = build(49, 1, "OpData", key="connection_creation_rate", value=0.0, remove=True)
    entry = build(49, 1, "EntryData", entity=(entity,), ops=(op,))
    request = build(49, 1, "AlterClientQuotasRequest", entries=(entry,), validate_only=False)
    return client.request(request).entries[0].error_code


def test_max_connections_per_ip() -> None:
    with EmbeddedBroker(overrides={"max.connections.per.ip": "2"}) as limited:
        with RawClient(limited.host, limited.port) as first:
            with RawClient(limited.host, limited.port) as second:
                assert second.request(api_versions_request()).error_code == ErrorCode.none
                with RawClient(limited.host, limited.port) as third:
                    assert third.is_closed_by_peer(timeout=10)  # at once, unanswered
            # once the broker has seen the second go, a new one is served
            assert _served_within(limited, 10)
            assert first.request(api_versions_request()).error_code == ErrorCode.none


def _served_within(broker: EmbeddedBroker, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with RawClient(broker.host, broker.port) as client:
            try:
                return client.request(api_versions_request()).error_code == ErrorCode.none
            except ConnectionClosed:
                time.sleep(0.05)
    return False


@pytest.mark.slow  # a JVM per tool run
def test_kafka_configs_alters_and_describes_quotas(broker: EmbeddedBroker) -> None:
    def configs(*args: str) -> str:
        run = run_tool("kafka-configs", broker.bootstrap, *args)
        assert run.exit_code == 0, run.stderr
        return run.stdout

    configs(
        "--alter",
        "--add-config",
        "producer_byte_rate=4096,consumer_byte_rate=8192",
        "--entity-type",
        "users",
        "--entity-name",
        "zoe",
    )
    configs(
        "--alter",
        "--add-config",
        "producer_byte_rate=1024",
        "--entity-type",
        "users",
        "--entity-default",
    )
    described = configs("--describe", "--entity-type", "users")
    assert "Quota configs for user-principal 'zoe' are" in described
    assert "producer_byte_rate=4096.0" in described and "consumer_byte_rate=8192.0" in described
    assert "Quota configs for the default user-principal are producer_byte_rate=1024.0" in described
    listed = ok_json(cli(broker, "quota", "list", "--user", "zoe", "--strict", "--format", "json"))
    assert listed == [
        {
            "entity": {"user": "zoe"},
            "quotas": {"consumer_byte_rate": 8192, "producer_byte_rate": 4096},
        }
    ]
    assert broker.broker.quotas.produce.quota_limit(("anyone", "")) == 1024.0
