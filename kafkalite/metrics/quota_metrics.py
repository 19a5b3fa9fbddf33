"""Client quotas' metrics, by Kafka's names (kafka.server:type=Produce|Fetch|Request,user=,
client-id= byte-rate, request-time and throttle-time, as the JMX exporter names them): per
quota sensor, the measured rate and the average throttle time given. Nothing for a quota
type never configured. The acceptors' connection-accept-rate (per listener and broker-wide),
connection-accept-throttle-time and ip-connection-accept-throttle-time (per listener), as
socket-server-metrics, and the share of time each listener's acceptor was held
(kafka.network:type=Acceptor,name=AcceptorBlockedPercent; here in percent of the last quota
window, not Kafka's meter of blocked ns a second)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from kafkalite.broker.quota_managers import QuotaManagers

LABELS = ["user", "client_id"]
_UNITS = {"byte_rate": "bytes per second", "request_time": "handler time in percent of one"}


def collect(quotas: QuotaManagers, now_ms: int) -> Iterator[Metric]:
    for quota_type, measured, manager in (
        ("produce", "byte_rate", quotas.produce),
        ("fetch", "byte_rate", quotas.fetch),
        ("request", "request_time", quotas.request),
    ):
        if not manager.enabled:
            continue
        rate = GaugeMetricFamily(
            f"kafka_server_{quota_type}_{measured}",
            f"{quota_type.capitalize()} {_UNITS[measured]}, per quota (user, client id)",
            labels=LABELS,
        )
        throttle = GaugeMetricFamily(
            f"kafka_server_{quota_type}_throttle_time",
            "Average throttle time in ms given, per quota (user, client id)",
            labels=LABELS,
        )
        for (user, client_id), sensors in sorted(manager.sensors.items()):
            rate.add_metric([user, client_id], sensors.rate.measure(now_ms))
            average = sensors.throttle_ms_total / sensors.throttles if sensors.throttles else 0.0
            throttle.add_metric([user, client_id], average)
        yield rate
        yield throttle
    yield from _connection_accept(quotas, now_ms)


def _connection_accept(quotas: QuotaManagers, now_ms: int) -> Iterator[Metric]:
    connections = quotas.connections
    prefix = "kafka_server_socket_server_metrics_"
    rate = GaugeMetricFamily(
        prefix + "connection_accept_rate",
        "Connections accepted a second, per listener",
        labels=["listener"],
    )
    throttle = GaugeMetricFamily(
        prefix + "connection_accept_throttle_time",
        "Average delay in ms of connections accepted over a creation rate, per listener",
        labels=["listener"],
    )
    ip_throttle = GaugeMetricFamily(
        prefix + "ip_connection_accept_throttle_time",
        "Average delay in ms before closing connections over their address's creation rate",
        labels=["listener"],
    )
    blocked = GaugeMetricFamily(
        "kafka_network_acceptor_acceptorblockedpercent",
        "Percent of the last quota window the listener's acceptor was held (rate, max.connections)",
        labels=["listener"],
    )
    for listener, stats in sorted(connections.accept_stats.items()):
        rate.add_metric([listener], connections.accept_rate(listener, now_ms))
        throttle.add_metric([listener], stats.throttle_time_avg_ms)
        ip_throttle.add_metric([listener], stats.ip_throttle_time_avg_ms)
        blocked.add_metric([listener], connections.blocked_percent(listener, now_ms))
    yield rate
    yield throttle
    yield ip_throttle
    yield blocked
    yield GaugeMetricFamily(
        prefix + "broker_connection_accept_rate",
        "Connections accepted a second, broker-wide",
        value=connections.accept_rate(None, now_ms),
    )
