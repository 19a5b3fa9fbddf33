"""Tiered storage's meters, with the names of Kafka's RemoteLogManager (BrokerTopicMetrics
RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, RemoteCopyErrorsPerSec,
RemoteFetchErrorsPerSec; RemoteCopyLagBytes; per topic RemoteLogSizeBytes and
RemoteLogMetadataCount, KIP-963)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from kafkalite.broker.remote_log_manager import RemoteLogManager

PREFIX = "kafka_server_brokertopicmetrics_"
REMOTE_SIZE_METRIC = PREFIX + "remotelogsizebytes"
REMOTE_COUNT_METRIC = PREFIX + "remotelogmetadatacount"


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
    size = GaugeMetricFamily(
        REMOTE_SIZE_METRIC, "Bytes of the topic's remote segments", labels=["topic"]
    )
    count = GaugeMetricFamily(REMOTE_COUNT_METRIC, "The topic's remote segments", labels=["topic"])
    for topic, (size_bytes, segments) in sorted(manager.remote_log_sizes().items()):
        size.add_metric([topic], size_bytes)
        count.add_metric([topic], segments)
    yield size
    yield count
