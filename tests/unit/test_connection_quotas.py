"""Kafka's ConnectionQuotas for max.connections and max.connection.creation.rate, broker-wide
and per listener, with a fake clock (the sans-IO state the acceptors consult)."""

from __future__ import annotations

from kafkalite.broker.client_quotas import entity_of
from kafkalite.broker.connection_quotas import UNBOUNDED, ConnectionLimits, ConnectionQuotas
from kafkalite.config import build_config

SAMPLES = 11  # quota.window.num


def quotas(**limits: object) -> ConnectionQuotas:
    connections = ConnectionQuotas(SAMPLES, 1)
    connections.configure(ConnectionLimits(**limits))  # type: ignore[arg-type]
    return connections


def take(connections: ConnectionQuotas, listener: str, count: int) -> None:
    for _ in range(count):
        assert connections.slot_available(listener)
        connections.inc(listener)


def test_at_max_connections_a_slot_frees_when_one_closes() -> None:
    connections = quotas(max_connections=3)
    woken: list[int] = []
    connections.on_change = lambda: woken.append(connections.total)
    take(connections, "PLAINTEXT", 3)
    assert not connections.slot_available("PLAINTEXT")
    connections.dec("PLAINTEXT")
    assert woken == [2]
    assert connections.slot_available("PLAINTEXT")


def test_a_listener_bound_blocks_only_that_listener() -> None:
    connections = quotas(max_connections=3, listener_max_connections={"A": 1})
    take(connections, "A", 1)
    assert not connections.slot_available("A")
    take(connections, "B", 2)
    assert not connections.slot_available("B")  # the broker-wide bound
    connections.dec("A")
    assert connections.slot_available("A") and connections.slot_available("B")


def test_a_raised_bound_wakes_the_acceptors() -> None:
    connections = quotas(max_connections=1)
    woken: list[bool] = []
    connections.on_change = lambda: woken.append(connections.slot_available("A"))
    take(connections, "A", 1)
    connections.configure(ConnectionLimits(max_connections=2))
    assert woken == [True]


def test_the_inter_broker_listener_is_protected_and_another_gives_way() -> None:
    connections = quotas(max_connections=2, inter_broker_listener="INTERNAL")
    take(connections, "EXTERNAL", 2)
    assert not connections.slot_available("EXTERNAL")
    take(connections, "INTERNAL", 1)  # not held back by the broker-wide bound
    assert connections.max_connections_exceeded("EXTERNAL")
    assert not connections.max_connections_exceeded("INTERNAL")
    connections.dec("EXTERNAL")  # the least recently used client connection, closed
    assert not connections.max_connections_exceeded("EXTERNAL")


def test_broker_creation_rate_throttles_acceptance() -> None:
    # 5 a second over at least 10 windows of 1 s: 50 at once are within it; the 51st
    # waits (5.1 - 5) / 5 * 10 s = 200 ms, and still counts
    connections = quotas(max_rate=5)
    assert [connections.record_accept("A", 0) for _ in range(50)] == [0] * 50
    assert connections.record_accept("B", 0) == 200
    assert connections.record_accept("A", 0) == 400
    assert connections.record_accept("A", 11_000) == 0  # the first windows expired
    stats = connections.accept_stats["A"]
    assert (stats.accepted, stats.throttled, stats.throttle_time_avg_ms) == (52, 1, 400)


def test_throttle_time_is_at_most_one_quota_window() -> None:
    connections = quotas(max_rate=1)
    throttles = [connections.record_accept("A", 0) for _ in range(30)]
    assert throttles[:10] == [0] * 10
    assert throttles[10:] == [1000] * 20


def test_listener_creation_rate_and_the_protected_listener() -> None:
    connections = quotas(
        max_rate=5,
        listener_max_rate={"A": 1, "INTERNAL": UNBOUNDED},
        inter_broker_listener="INTERNAL",
    )
    assert [connections.record_accept("A", 0) for _ in range(10)] == [0] * 10
    assert connections.record_accept("A", 0) == 1000  # A's own bound: 1 a second
    # the protected listener is not counted against the broker's rate, nor bound by it
    assert [connections.record_accept("INTERNAL", 0) for _ in range(100)] == [0] * 100
    assert [connections.record_accept("B", 0) for _ in range(39)] == [0] * 39
    assert connections.record_accept("B", 0) == 200


def test_an_ip_throttled_connection_is_not_counted_by_its_listener_nor_the_broker() -> None:
    connections = quotas(max_rate=5)
    connections.on_client_quota_changed(entity_of([("ip", None)]), {"connection_creation_rate": 1})
    assert [connections.record_accept("A", 0) for _ in range(50)] == [0] * 50
    assert [connections.record_connection("10.0.0.1", 0, "A") for _ in range(10)] == [0] * 10
    # the 51st accept: over both; the IP's throttle un-records it from the broker's rate
    assert connections.record_accept("A", 0) == 200
    assert connections.record_connection("10.0.0.1", 0, "A") == 1000
    assert connections.record_accept("A", 0) == 200  # 51 counted again, not 52
    assert connections.record_connection("10.0.0.1", 0, "A") == 1000
    stats = connections.accept_stats["A"]  # ip-connection-accept-throttle-time
    assert (stats.ip_throttled, stats.ip_throttle_time_avg_ms) == (2, 1000.0)


def test_limits_from_the_config_fall_back_to_the_broker_wide_values() -> None:
    config = build_config(
        {
            "listeners": "PLAINTEXT://:0,INTERNAL://:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "max.connections": "10",
            "max.connection.creation.rate": "20",
            "listener.name.plaintext.max.connections": "3",
            "listener.name.internal.max.connection.creation.rate": "7",
        }
    )
    limits = ConnectionLimits.of(config)
    assert (limits.max_connections, limits.max_rate) == (10, 20)
    assert limits.listener_max_connections == {"PLAINTEXT": 3, "INTERNAL": 10}
    assert limits.listener_max_rate == {"PLAINTEXT": 20, "INTERNAL": 7}
    assert limits.inter_broker_listener == "INTERNAL"
    one_listener = ConnectionLimits.of(build_config({}))
    assert one_listener.max_connections == UNBOUNDED
    assert one_listener.inter_broker_listener is None  # protected only among others


def test_acceptor_blocked_percent_is_the_held_time_over_the_quota_window() -> None:
    connections = quotas()
    assert connections.blocked_percent("A", 0) == 0.0
    # 500 ms held in the first second: over at least 10 windows of 1 s, 50 ms a second
    connections.record_blocked("A", 300, 0)
    connections.record_blocked("A", 200, 500)
    assert connections.blocked_percent("A", 1000) == 5.0
    assert connections.blocked_percent("B", 1000) == 0.0
    assert connections.blocked_percent("A", 12_000) == 0.0  # the window moved past it
