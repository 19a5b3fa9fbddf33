"""Metric families on scrape: the request-path counters plus gauges read from broker state.

Names are the Prometheus JMX exporter's rendering of Kafka's MBeans (lowercaseOutputName, as
in Strimzi's kafka-metrics.yaml), e.g. kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec,topic=T -> kafka_server_brokertopicmetrics_messagesin_total{topic="T"}.
Consumer lag and the cluster's topics use kafka-exporter's names (kafka_consumergroup_lag...,
exporter_view.py), which Kafka dashboards graph next to the broker's. Runs on the trio
thread, so broker state is read consistently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kafkalite.coordinator.states import GroupState
from kafkalite.metrics import exporter_view, partition_gauges, quota_metrics, remote_storage
from kafkalite.metrics import share_groups as share_group_metrics
from kafkalite.metrics.counters import LATENCY_BUCKETS_MS, LatencyHistogram, RequestTimes
from kafkalite.metrics.loop_time import IdleWindow

if TYPE_CHECKING:
    from kafkalite.broker.broker import Broker

_TOPIC_METERS = {
    "messagesin": ("messages_in", "Messages appended (MessagesInPerSec)"),
    "bytesin": ("bytes_in", "Bytes appended (BytesInPerSec)"),
    "bytesout": ("bytes_out", "Bytes fetched (BytesOutPerSec)"),
    "bytesrejected": ("bytes_rejected", "Bytes refused as too large (BytesRejectedPerSec)"),
    "failedproducerequests": ("failed_produce_requests", "Failed produce partition requests"),
    "failedfetchrequests": ("failed_fetch_requests", "Failed fetch partition requests"),
    "totalproducerequests": ("total_produce_requests", "Produce partition requests"),
    "totalfetchrequests": ("total_fetch_requests", "Fetch partition requests"),
}
_VIEW_COUNTERS = {
    "records_read": "Records of the source a view's reads scanned",
    "records_matched": "Records a view sent",
    "bytes_read": "Bytes a view's reads (and its header index) read from the source's log",
    "bytes_served": "Bytes a view answered to consumers",
    "batches_skipped": "Source batches a header index let a view answer without reading",
}
_GROUP_STATES = {
    "numgroupspreparingrebalance": GroupState.PREPARING_REBALANCE,
    "numgroupscompletingrebalance": GroupState.COMPLETING_REBALANCE,
    "numgroupsstable": GroupState.STABLE,
    "numgroupsdead": GroupState.DEAD,
    "numgroupsempty": GroupState.EMPTY,
}


# Yammer's percentiles as the JMX exporter's rules name them (99thPercentile -> "0.99").
QUANTILES = tuple((label, float(label)) for label in ("0.50", "0.75", "0.95", "0.98", "0.99"))
QUANTILES += (("0.999", 0.999),)
PROC_SELF_IO = Path("/proc/self/io")


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _buckets(histogram: LatencyHistogram) -> list[tuple[str, float]]:
    """Prometheus' cumulative buckets of a histogram over LATENCY_BUCKETS_MS."""
    cumulative, buckets = 0, []
    for bound, count in zip((*LATENCY_BUCKETS_MS, "+Inf"), histogram.counts, strict=True):
        cumulative += count
        buckets.append((str(bound), cumulative))
    return buckets


def quantile(ordered: list[float], q: float) -> float:
    """Dropwizard's Snapshot.getValue: interpolated between the two nearest samples."""
    if not ordered:
        return 0.0
    pos = q * (len(ordered) + 1)
    if pos < 1:
        return ordered[0]
    if pos >= len(ordered):
        return ordered[-1]
    lower, upper = ordered[int(pos) - 1], ordered[int(pos)]
    return lower + (pos - int(pos)) * (upper - lower)


def _request_time_summary(name: str, times: RequestTimes) -> Iterator[tuple[str, dict, float]]:
    ordered = sorted(times.recent)
    for label, q in QUANTILES:
        yield "", {"request": name, "quantile": label}, quantile(ordered, q)
    yield "_count", {"request": name}, sum(times.counts)
    yield "_sum", {"request": name}, times.sum_ms


def _disk_io() -> dict[str, int]:
    """Kafka's LinuxIoMetricsCollector: bytes this process read from and wrote to storage."""
    try:
        fields = dict(line.split(":", 1) for line in PROC_SELF_IO.read_text().splitlines())
        return {"read": int(fields["read_bytes"]), "write": int(fields["write_bytes"])}
    except (OSError, KeyError, ValueError):  # not Linux, or /proc/self/io not readable
        return {}


class BrokerCollector(Collector):
    def __init__(self, broker: Broker, listener: str, api_names: Mapping[int, str]) -> None:
        self.broker = broker
        self.listener = listener
        self.api_names = api_names  # API key -> Kafka's name (the `request` label)
        self._generations: dict[str, int] = {}
        self._rebalances = 0
        self._idle = IdleWindow(broker.metrics.loop)

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_meters()
        yield from self._requests()
        yield from self._network()
        yield from self._idle_percent()
        yield from self._disk()
        yield from self._replica_manager()
        yield from partition_gauges.collect(self.broker.replica_manager)
        yield from exporter_view.collect(self.broker, self.listener)
        yield from self._logs()
        yield from self._groups()
        yield from self._delayed_delivery()
        yield from self._views()
        yield from remote_storage.collect(self.broker.remote_log_manager)
        yield from quota_metrics.collect(self.broker.quotas, self.broker.clock_ms())
        share_groups = self.broker.share_groups
        yield from share_group_metrics.collect(share_groups.partitions if share_groups else None)

    def _views(self) -> Iterator[Metric]:
        """What reading each view did (issue 18): records scanned and sent, bytes read from
        the source's log and served, batches a header index let it skip."""
        labels = ["view", "source"]
        families = [
            (attr, CounterMetricFamily(f"kafkalite_view_{attr}", doc, labels=labels))
            for attr, doc in _VIEW_COUNTERS.items()
        ]
        for view in self.broker.replica_manager.views.all():
            for attr, family in families:
                family.add_metric([view.name, view.source], getattr(view.stats, attr))
        for _, family in families:
            yield family

    def _api_name(self, api_key: int) -> str:
        return self.api_names.get(api_key, str(api_key))

    # -- counters from the request path -------------------------------------------------

    def _topic_meters(self) -> Iterator[Metric]:
        metrics = self.broker.metrics
        live = self.broker.replica_manager.topics
        for gone in [name for name in metrics.topics if name not in live]:
            del metrics.topics[gone]  # Kafka removes a deleted topic's meters
        for short, (attr, doc) in _TOPIC_METERS.items():
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc)
            family.add_sample(family.name + "_total", {}, getattr(metrics.all_topics, attr))
            for topic, stats in sorted(metrics.topics.items()):
                family.add_sample(family.name + "_total", {"topic": topic}, getattr(stats, attr))
            yield family

    def _requests(self) -> Iterator[Metric]:
        metrics = self.broker.metrics
        rate = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered (RequestsPerSec)",
            labels=["request", "version"],
        )
        for (key, version), count in sorted(metrics.requests.items()):
            rate.add_metric([self._api_name(key), str(version)], count)
        yield rate
        # TotalTimeMs as the JMX exporter renders Kafka's histogram: quantiles of the latest
        # requests and a count (plus the sum), and as a Prometheus histogram under our name.
        summary = Metric(
            "kafka_network_requestmetrics_totaltimems",
            "Request time in ms from dequeue to answer sent (TotalTimeMs), latest requests",
            "summary",
        )
        histogram = HistogramMetricFamily(
            "kafkalite_network_requestmetrics_totaltimems",
            "Request time in ms from dequeue to answer sent (TotalTimeMs)",
            labels=["request"],
        )
        for key, times in sorted(metrics.latency.items()):
            name = self._api_name(key)
            for suffix, labels, value in _request_time_summary(name, times):
                summary.add_sample(summary.name + suffix, labels, value)
            histogram.add_metric([name], _buckets(times), times.sum_ms)
        yield summary
        yield histogram

    def _idle_percent(self) -> Iterator[Metric]:
        """The loop's idle shares over the last minute (loop_time.py), under Kafka's names,
        and the cumulative seconds they come from (for rate() over any window)."""
        network, handlers = self._idle.shares()
        yield _gauge(
            "kafka_network_socketserver_networkprocessoravgidle_percent",
            "Share of the last minute the event loop waited for I/O (0..1)",
            network,
        )
        yield _gauge(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "Share of the last minute not spent handling requests (0..1)",
            handlers,
        )
        loop = self.broker.metrics.loop
        yield CounterMetricFamily(
            "kafkalite_eventloop_io_wait_seconds",
            "Seconds the event loop waited for I/O",
            value=loop.io_wait_seconds,
        )
        yield CounterMetricFamily(
            "kafkalite_request_handler_seconds",
            "Seconds spent in request handlers and encoding their answers",
            value=loop.handler_seconds,
        )

    def _disk(self) -> Iterator[Metric]:
        for name, value in _disk_io().items():
            yield _gauge(
                f"kafka_server_kafkaserver_linux_disk_{name}_bytes",
                f"Bytes the process {name} from storage (/proc/self/io)",
                value,
            )

    def _network(self) -> Iterator[Metric]:
        metrics = self.broker.metrics
        labels = {"listener": self.listener, "networkProcessor": "0"}
        prefix = "kafka_server_socket_server_metrics_"
        for name, doc, value in (
            ("incoming_byte", "Bytes received from clients", metrics.network_bytes_in),
            ("outgoing_byte", "Bytes sent to clients", metrics.network_bytes_out),
            ("connection_creation", "Connections accepted", metrics.connections_created),
            (
                "successful_authentication",
                "Connections authenticated (TLS, SASL, or plaintext at once)",
                metrics.successful_authentications,
            ),
            (
                "failed_authentication",
                "Failed TLS handshakes and SASL authentications",
                metrics.failed_authentications,
            ),
            (
                "successful_reauthentication",
                "SASL sessions renewed (KIP-368)",
                metrics.successful_reauthentications,
            ),
            (
                "failed_reauthentication",
                "SASL re-authentications failed",
                metrics.failed_reauthentications,
            ),
        ):
            family = CounterMetricFamily(prefix + name, doc, labels=list(labels))
            family.add_metric(list(labels.values()), value)
            yield family
        connections = GaugeMetricFamily(
            prefix + "connection_count", "Open client connections", labels=list(labels)
        )
        connections.add_metric(list(labels.values()), metrics.connections)
        yield connections

    # -- gauges from broker state -------------------------------------------------------

    def _partitions(self) -> Iterator[Any]:
        for topic in self.broker.replica_manager.topics.values():
            yield from topic.partitions.values()

    def _replica_manager(self) -> Iterator[Metric]:
        node = self.broker.node_id
        partitions = list(self._partitions())
        leading = [p for p in partitions if p.leader_id == node]
        prefix = "kafka_server_replicamanager_"
        yield _gauge(prefix + "partitioncount", "Partitions on this broker", len(partitions))
        yield _gauge(prefix + "leadercount", "Partitions this broker leads", len(leading))
        yield _gauge(
            prefix + "underreplicatedpartitions",
            "Led partitions whose ISR is smaller than their replica set",
            sum(len(p.isr) < len(p.replicas) for p in leading),
        )
        replicas = self.broker.replica_manager
        isr_changes = (("isrshrinks", replicas.isr_shrinks), ("isrexpands", replicas.isr_expands))
        for name, value in isr_changes:
            yield CounterMetricFamily(prefix + name, f"ISR {name[3:]}", value=value)
        controller = "kafka_controller_kafkacontroller_"
        is_controller = self.broker.metadata.controller_id() == node
        yield _gauge(
            controller + "activecontrollercount", "1 on the active controller", int(is_controller)
        )
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leaders elected from outside the ISR by this broker as controller",
            value=self.broker.controller.unclean_leader_elections(),
        )
        yield _gauge(
            controller + "offlinepartitionscount",
            "Partitions without a live leader",
            sum(p.leader_id < 0 for p in partitions),
        )

    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        families = {
            "size": GaugeMetricFamily("kafka_log_log_size", "Log bytes on disk", labels=labels),
            "segments": GaugeMetricFamily(
                "kafka_log_log_numlogsegments", "Log segments", labels=labels
            ),
            "end": GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels),
            "start": GaugeMetricFamily(
                "kafka_log_log_logstartoffset", "Log start offset", labels=labels
            ),
        }
        for p in self._partitions():
            key = [p.topic, str(p.index)]
            families["size"].add_metric(key, p.log.size_in_bytes)
            families["segments"].add_metric(key, len(p.log.segments))
            families["end"].add_metric(key, p.log_end_offset)
            families["start"].add_metric(key, p.log_start_offset)
        yield from families.values()

    def _delayed_delivery(self) -> Iterator[Metric]:
        """Held records per partition, releases, and how late they came (kafkalite's own)."""
        delayed = self.broker.replica_manager.delayed_delivery
        prefix, labels = "kafkalite_delayeddelivery_", ["topic", "partition"]
        held = GaugeMetricFamily(prefix + "heldrecords", "Records held", labels=labels)
        due = GaugeMetricFamily(
            prefix + "nextduetimestampms", "Due time of the next held record", labels=labels
        )
        for (topic, index), store in sorted(delayed.stores.items()):
            held.add_metric([topic, str(index)], store.held_count)
            next_due = store.next_due_ms
            if next_due is not None:
                due.add_metric([topic, str(index)], next_due)
        yield held
        yield due
        yield CounterMetricFamily(prefix + "released", "Held records released", delayed.released)
        yield CounterMetricFamily(
            prefix + "dropped", "Due records their partition refused", delayed.dropped
        )
        yield CounterMetricFamily(
            prefix + "aborted", "Held records of aborted transactions", delayed.aborted
        )
        lateness = HistogramMetricFamily(
            prefix + "latenessms", "How long after its due time a record was released (ms)"
        )
        lateness.add_metric([], _buckets(delayed.lateness), delayed.lateness.sum_ms)
        yield lateness
        # Kafka-style (kafka.server:type=DelayedDelivery,name=StoreReplicationLag,...).
        lag = GaugeMetricFamily(
            "kafka_server_delayeddelivery_storereplicationlag",
            "Delay store offsets not yet copied by every ISR replica (store end - store HW)",
            labels=labels,
        )
        for (topic, index), value in sorted(delayed.store_replication_lag().items()):
            lag.add_metric([topic, str(index)], value)
        yield lag

    def _groups(self) -> Iterator[Metric]:
        coordinator = self.broker.groups.coordinator
        groups = [coordinator.group(listed.group_id) for listed in coordinator.list_groups()]
        live = [group for group in groups if group is not None]
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield _gauge(prefix + "numgroups", "Groups", len(live))
        for name, state in _GROUP_STATES.items():
            count = sum(group.state is state for group in live)
            yield _gauge(prefix + name, f"Groups in state {state}", count)
        yield CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_group_rebalance",
            "Rebalances completed (generation changes) of classic groups",
            value=self._count_rebalances(live),
        )
        yield from self._lag(coordinator, live)

    def _count_rebalances(self, groups: list[Any]) -> int:
        """Generation bumps since the last scrape (a group deleted and recreated between two
        scrapes counts from generation 0)."""
        seen: dict[str, int] = {}
        for group in groups:
            last = self._generations.get(group.group_id, 0)
            self._rebalances += group.generation_id - (last if group.generation_id >= last else 0)
            seen[group.group_id] = group.generation_id
        self._generations = seen
        return self._rebalances

    def _lag(self, coordinator: Any, groups: list[Any]) -> Iterator[Metric]:
        labels = ["consumergroup", "topic", "partition"]
        offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "Committed offset", labels=labels
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag", "High watermark minus committed offset", labels=labels
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum", "Lag of the group per topic", labels=labels[:2]
        )
        offset_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Committed offsets of the group per topic, summed",
            labels=labels[:2],
        )
        members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of the group", labels=labels[:1]
        )
        replicas = self.broker.replica_manager
        for group in groups:
            members.add_metric([group.group_id], len(group.members))
            per_topic: dict[str, int] = {}
            offsets: dict[str, int] = {}
            for tp, committed in sorted(coordinator.committed_offsets(group.group_id).items()):
                partition = replicas.partition(tp.topic, tp.partition)
                if partition is None:
                    continue
                behind = max(partition.high_watermark - committed.offset, 0)
                key = [group.group_id, tp.topic, str(tp.partition)]
                offset.add_metric(key, committed.offset)
                lag.add_metric(key, behind)
                per_topic[tp.topic] = per_topic.get(tp.topic, 0) + behind
                offsets[tp.topic] = offsets.get(tp.topic, 0) + committed.offset
            for topic, total in sorted(per_topic.items()):
                lag_sum.add_metric([group.group_id, topic], total)
                offset_sum.add_metric([group.group_id, topic], offsets[topic])
        yield from (offset, offset_sum, lag, lag_sum, members)
