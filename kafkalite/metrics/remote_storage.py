"""Tiered storage's meters, with the names of Kafka's RemoteLogManager (BrokerTopicMetrics
RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, RemoteCopyErrorsPerSec,
RemoteFetchErrorsPerSec; RemoteCopyLagBytes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from kafkalite.broker.remote_log_manager import RemoteLogManager

PREFIX = "kafka_server_brokertopicmetrics_"


def collect(manager: RemoteLogManager | None) -> Iterator[Metric]:
    if manager is None:
        return
    for name, doc, value in (
        ("remotecopybytes", "Bytes copied to remote storage", manager.copy_bytes),
        ("remotefetchbytes", "Bytes read from remote storage", manager.fetch_bytes),
        ("remotecopyerrors", "Failed segment copies", manager.copy_errors),
        ("remotefetcherrors", "Failed remote reads", manager.fetch_errors),
    ):
        yield CounterMetricFamily(PREFIX + name, doc, value=value)
    yield GaugeMetricFamily(
        PREFIX + "remotecopylagbytes",
        "Bytes of closed segments not yet copied to remote storage",
        value=manager.copy_lag_bytes(),
    )
