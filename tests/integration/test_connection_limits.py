"""max.connections and max.connection.creation.rate on real sockets: at the bound a
listener's acceptor holds the next connection (it is accepted, not served, not refused) until
one closes; a per-listener bound holds only that listener; the bounds change dynamically
(IncrementalAlterConfigs on the cluster-wide default); a connection over the creation rate is
served after its throttle time."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from e2e_helpers import wait_until
from kio.schema.errors import ErrorCode

from kafkalite.metrics import quota_metrics
from kafkalite.testing import EmbeddedBroker
from protocol_tests.raw_client import RawClient, api_versions_request, build, response_class

DEADLINE_S = 10.0


def _accepted(broker: EmbeddedBroker, listener: str) -> int:
    def count() -> int:
        stats = broker.broker.quotas.connections.accept_stats.get(listener)
        return 0 if stats is None else stats.accepted

    return int(broker.call(count))


def _served(client: RawClient) -> bool:
    return client.request(api_versions_request()).error_code == ErrorCode.none


@contextlib.contextmanager
def _held(broker: EmbeddedBroker, listener: str = "PLAINTEXT") -> Iterator[RawClient]:
    """A connection the listener's acceptor has taken but holds: its request unanswered."""
    before = _accepted(broker, listener)
    with RawClient(broker.host, broker.listener_ports[listener]) as client:
        client.send(api_versions_request())
        wait_until(lambda: _accepted(broker, listener) == before + 1)
        assert not client.readable_within(0.1)  # held by the acceptor: nothing reads it
        yield client


def _samples(broker: EmbeddedBroker) -> dict[tuple[str, str], float]:
    """The quota families' samples, by (name, listener)."""
    quotas = broker.broker.quotas
    families = quota_metrics.collect(quotas, broker.broker.clock_ms())
    return {
        (sample.name, sample.labels.get("listener", "")): sample.value
        for family in families
        for sample in family.samples
    }


def _answer(client: RawClient) -> ErrorCode:
    response_cls = response_class(18, 3)
    return ErrorCode(client.recv(response_cls, timeout=DEADLINE_S)[1].error_code)


def test_at_max_connections_the_next_is_served_once_one_closes() -> None:
    with EmbeddedBroker(overrides={"max.connections": "3"}) as broker:
        clients = [RawClient(broker.host, broker.port) for _ in range(3)]
        try:
            assert all(_served(client) for client in clients)
            with _held(broker) as fourth:
                assert broker.call(lambda: broker.broker.quotas.connections.total) == 3
                clients.pop(0).close()
                assert _answer(fourth) == ErrorCode.none
                assert all(_served(client) for client in clients)
        finally:
            for client in clients:
                client.close()


def test_a_listener_bound_holds_only_that_listener() -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        "listener.name.other.max.connections": "1",
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        with RawClient(broker.host, broker.listener_ports["OTHER"]) as first:
            assert _served(first)
            with _held(broker, "OTHER") as second:
                with RawClient(broker.host, broker.port) as elsewhere:
                    assert _served(elsewhere)
                first.close()
                assert _answer(second) == ErrorCode.none


def _alter_default(client: RawClient, name: str, value: str) -> ErrorCode:
    op = build(44, 1, "AlterableConfig", name=name, config_operation=0, value=value)
    resource = build(
        44, 1, "AlterConfigsResource", resource_type=4, resource_name="", configs=(op,)
    )
    request = build(
        44, 1, "IncrementalAlterConfigsRequest", resources=(resource,), validate_only=False
    )
    return ErrorCode(client.request(request).responses[0].error_code)


def test_max_connections_is_updated_dynamically() -> None:
    with EmbeddedBroker() as broker:
        with RawClient(broker.host, broker.port) as admin:
            assert _alter_default(admin, "max.connections", "2") == ErrorCode.none
            with RawClient(broker.host, broker.port) as second:
                assert _served(second)
                with _held(broker) as third:
                    # raised while an acceptor waits: it takes the held connection in
                    assert _alter_default(admin, "max.connections", "3") == ErrorCode.none
                    assert _answer(third) == ErrorCode.none
            assert _alter_default(admin, "max.connections", "-1") == ErrorCode.invalid_request
            assert _alter_default(admin, "listener.name.plaintext.max.connections", "5") == (
                ErrorCode.none
            )


def test_over_the_creation_rate_a_connection_is_served_after_its_throttle_time() -> None:
    # 2 a second over 2 windows of 1 s (at least 1 s): the 3rd at once waits
    # about (3 - 2) / 2 * 1 s = 500 ms before it is taken in
    overrides = {
        "max.connection.creation.rate": "2",
        "quota.window.num": "2",
        "quota.window.size.seconds": "1",
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        clients = [RawClient(broker.host, broker.port) for _ in range(2)]
        try:
            assert all(_served(client) for client in clients)
            connected = time.monotonic()
            clients.append(RawClient(broker.host, broker.port))
            assert _served(clients[-1])
            assert time.monotonic() - connected >= 0.45
            stats = broker.call(lambda: broker.broker.quotas.connections.accept_stats["PLAINTEXT"])
            assert (stats.accepted, stats.throttled) == (3, 1)
            assert 450 <= stats.throttle_time_avg_ms <= 550  # 500 less the ms between accepts
            metrics = broker.call(lambda: _samples(broker))
            prefix = "kafka_server_socket_server_metrics_connection_accept_"
            assert metrics[prefix + "throttle_time", "PLAINTEXT"] == stats.throttle_time_avg_ms
            assert metrics[prefix + "rate", "PLAINTEXT"] > 0
            assert metrics["kafka_network_acceptor_acceptorblockedpercent", "PLAINTEXT"] > 0
        finally:
            for client in clients:
                client.close()


def test_the_inter_broker_listener_takes_the_slot_of_the_least_recently_active() -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "2",
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        with (
            RawClient(broker.host, broker.port) as idle,
            RawClient(broker.host, broker.port) as busy,
        ):
            assert _served(idle) and _served(busy)
            assert _served(busy)  # the other is now the least recently active
            with RawClient(broker.host, broker.listener_ports["INTERNAL"]) as replica:
                assert _served(replica)  # not held: the inter-broker listener is protected
                assert idle.is_closed_by_peer(timeout=DEADLINE_S)
                assert _served(busy)
            wait_until(lambda: broker.call(lambda: broker.broker.quotas.connections.total) == 1)


@pytest.mark.extended  # a JVM per tool run; the raw IncrementalAlterConfigs test covers it
def test_kafka_configs_sets_the_connection_limits_on_the_broker_default() -> None:
    from compat.kafka_tools import run_tool

    with EmbeddedBroker() as broker:
        settings = "max.connections=100,listener.name.plaintext.max.connection.creation.rate=50"
        altered = run_tool(
            "kafka-configs",
            broker.bootstrap,
            *("--entity-type", "brokers", "--entity-default", "--alter"),
            *("--add-config", settings),
        )
        assert altered.exit_code == 0, altered.stderr
        limits = broker.call(lambda: broker.broker.quotas.connections.limits)
        assert (limits.max_connections, limits.listener_max_rate) == (100, {"PLAINTEXT": 50})
        refused = run_tool(
            "kafka-configs",
            broker.bootstrap,
            *("--entity-type", "brokers", "--entity-default", "--alter"),
            *("--add-config", "max.connections=-5"),
        )
        assert refused.exit_code == 1
        assert "InvalidRequestException: Invalid value -5 for configuration max.connections" in (
            refused.stderr
        )
