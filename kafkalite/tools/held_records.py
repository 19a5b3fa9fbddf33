"""Held delayed records per partition, for `kafkalite topic describe --metrics URL`: Kafka's
protocol has no request for them, so they are read from the brokers' Prometheus endpoints."""

from __future__ import annotations

from prometheus_client.samples import Sample

from kafkalite.tools.broker_metrics import scrape

HELD_METRIC = "kafkalite_delayeddelivery_heldrecords"
NEXT_DUE_METRIC = "kafkalite_delayeddelivery_nextduetimestampms"

Held = dict[tuple[str, int], tuple[int, int | None]]


def held_records(urls: list[str], timeout: float) -> Held:
    """(held records, next due time in epoch ms) by partition, from every broker named."""
    samples = scrape(urls, (HELD_METRIC, NEXT_DUE_METRIC), timeout)
    counts, dues = (_by_partition(samples[name]) for name in (HELD_METRIC, NEXT_DUE_METRIC))
    return {key: (count, dues.get(key)) for key, count in counts.items()}


def _by_partition(samples: list[Sample]) -> dict[tuple[str, int], int]:
    return {
        (s.labels["topic"], int(s.labels["partition"])): int(s.value)
        for s in samples
        if "topic" in s.labels and s.labels.get("partition", "").isdigit()
    }
