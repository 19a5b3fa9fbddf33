"""Partition sizes on disk, from the brokers' Prometheus endpoints (kafka_log_log_size).

Kafka's clients cannot ask for log sizes without DescribeLogDirs, which confluent-kafka's
Python AdminClient does not offer; a kafkalite broker (kafkalite.metrics.port) or an Apache
Kafka broker with the JMX exporter publishes them, so `kafkalite console --metrics URL` reads
them there. A URL that does not answer gives no sizes, never an error page.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

SIZE_METRIC = "kafka_log_log_size"


def partition_sizes(urls: list[str], timeout: float) -> dict[tuple[str, int], int]:
    sizes: dict[tuple[str, int], int] = {}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                text = answer.read().decode("utf-8")
        except (OSError, ValueError):
            continue
        for family in text_string_to_metric_families(text):
            if family.name != SIZE_METRIC:
                continue
            for sample in family.samples:
                labels = sample.labels
                if "topic" in labels and labels.get("partition", "").isdigit():
                    key = (labels["topic"], int(labels["partition"]))
                    sizes[key] = max(sizes.get(key, 0), int(sample.value))  # leader or replica
    return sizes
