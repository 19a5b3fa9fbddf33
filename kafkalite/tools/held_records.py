"""Held delayed records per partition, for `kafkalite topic describe --metrics URL`: Kafka's
protocol has no request for them, so they are read from the brokers' Prometheus endpoints
(kafkalite.metrics.port), as the console reads partition sizes."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from kafkalite.tools.common import ToolError

HELD_METRIC = "kafkalite_delayeddelivery_heldrecords"
NEXT_DUE_METRIC = "kafkalite_delayeddelivery_nextduetimestampms"

Held = dict[tuple[str, int], tuple[int, int | None]]


def held_records(urls: list[str], timeout: float) -> Held:
    """(held records, next due time in epoch ms) by partition, from every broker named."""
    counts: dict[tuple[str, int], int] = {}
    dues: dict[tuple[str, int], int] = {}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                text = answer.read().decode("utf-8")
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read metrics from {url}: {exc}") from None
        for family in text_string_to_metric_families(text):
            if family.name not in (HELD_METRIC, NEXT_DUE_METRIC):
                continue
            into = counts if family.name == HELD_METRIC else dues
            for sample in family.samples:
                labels = sample.labels
                if "topic" in labels and labels.get("partition", "").isdigit():
                    into[(labels["topic"], int(labels["partition"]))] = int(sample.value)
    return {key: (count, dues.get(key)) for key, count in counts.items()}
