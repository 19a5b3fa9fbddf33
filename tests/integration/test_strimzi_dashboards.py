"""Strimzi's Kafka and Kafka Exporter dashboards (docs/grafana/strimzi/) against a real
single-node broker's /metrics after produce and consume traffic: every series their queries
name is served, with the labels the queries select or group by."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from kafkalite.testing import BrokerProcess
from tests.integration.dashboard_queries import Queried, dashboard_series, queried
from tests.integration.e2e_helpers import consume_all, consumer, create_topic, producer
from tests.integration.metrics_helpers import base_url, get

DASHBOARDS = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "strimzi"
KAFKA = DASHBOARDS / "strimzi-kafka.json"
EXPORTER = DASHBOARDS / "strimzi-kafka-exporter.json"

# Labels Prometheus adds when it scrapes (Strimzi's pod monitors, the kubelet), not the target.
SCRAPE_LABELS = frozenset(
    {"namespace", "strimzi_io_cluster", "strimzi_io_name", "kubernetes_pod_name", "pod"}
    | {"container", "persistentvolumeclaim"}
)

# Series no kafkalite broker serves, each with why.
NOT_SERVED = {
    # Kubernetes' own series (cAdvisor and the kubelet), about the pod, not from Kafka.
    "container_cpu_usage_seconds_total": "Kubernetes cAdvisor",
    "container_memory_usage_bytes": "Kubernetes cAdvisor",
    "kubelet_volume_stats_available_bytes": "Kubernetes kubelet",
    # The JVM's (the JMX exporter's hotspot collectors): kafkalite is a Python process; its
    # memory, CPU, GC and threads are process_* and python_gc_* instead.
    "jvm_memory_used_bytes": "JVM only",
    "jvm_gc_collection_seconds_sum": "JVM only",
    "jvm_gc_collection_seconds_count": "JVM only",
    "jvm_threads_current": "JVM only",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        tmp_path_factory.mktemp("strimzi"), {"kafkalite.metrics.port": "0"}
    ) as process:
        yield process


def served_labels(broker: BrokerProcess) -> dict[str, set[str]]:
    """Metric name -> the label names its samples carry."""
    status, text = get(base_url(broker) + "/metrics")
    assert status == 200
    served: dict[str, set[str]] = {}
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$", line)
        if match:
            labels = set(re.findall(r'(\w+)="', match.group(2) or ""))
            served.setdefault(match.group(1), set()).update(labels)
    return served


def traffic(broker: BrokerProcess) -> None:
    """Records produced to a 2-partition topic, read back by a group that commits."""
    topic, group = "dashboards", "dashboards-group"
    create_topic(broker.bootstrap, topic, partitions=2)
    client = producer(broker.bootstrap)
    for i in range(20):
        client.produce(topic, key=b"k%d" % i, value=b"v" * 100)
    assert client.flush(30) == 0
    read = consume_all(broker.bootstrap, topic, [0, 1])
    assert sum(len(records) for records in read.values()) == 20
    committer = consumer(broker.bootstrap, **{"group.id": group})
    try:
        ends = [TopicPartition(topic, p, records[-1].offset + 1) for p, records in read.items()]
        committer.commit(offsets=ends, asynchronous=False)
    finally:
        committer.close()


def missing(wanted: dict[str, Queried], served: dict[str, set[str]]) -> list[str]:
    problems = []
    for name, entry in sorted(wanted.items()):
        if name in NOT_SERVED:
            continue
        if name not in served:
            problems.append(f"{name}: not served")
        elif absent := entry.labels - SCRAPE_LABELS - served[name]:
            problems.append(f"{name}: no {sorted(absent)} label")
    return problems


def test_every_series_of_strimzis_dashboards_is_served(broker: BrokerProcess) -> None:
    traffic(broker)
    served = served_labels(broker)
    kafka, exporter = dashboard_series(KAFKA), dashboard_series(EXPORTER)
    assert (len(kafka), len(exporter)) == (30, 12)  # what the parser finds in these copies
    assert missing(kafka, served) == []
    assert missing(exporter, served) == []
    # The list of exceptions stays true: each is queried, and is indeed not served.
    assert set(NOT_SERVED) <= set(kafka) | set(exporter)
    assert set(NOT_SERVED) & set(served) == set()


def test_the_query_reader() -> None:
    expr = (
        'sum(irate(kafka_x_total{namespace="$ns",topic=~"$t",topic!="a{2}"}[5m])) by (pod)'
        ' / sum(kafka_y{listener="l"} < bool 1) without (z) + 2'
    )
    found = queried(expr)
    assert sorted(found) == ["kafka_x_total", "kafka_y"]
    assert found["kafka_x_total"].labels == {"namespace", "topic", "pod", "z"}
    assert found["kafka_y"].labels == {"listener", "pod", "z"}
    values = queried('label_values(kafka_topic_partition_current_offset{namespace="$n"}, topic)')
    assert {n: e.labels for n, e in values.items()} == {
        "kafka_topic_partition_current_offset": {"namespace", "topic"}
    }
    assert sorted(queried("query_result(kafka_broker_info)")) == ["kafka_broker_info"]
