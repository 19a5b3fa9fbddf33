"""Samples of the brokers' Prometheus endpoints (kafkalite.metrics.port), for what Kafka's
protocol has no request for: held delayed records, remote log sizes (`kafkalite topic
describe --metrics URL`), as the console reads partition sizes."""

from __future__ import annotations

import urllib.request
from collections.abc import Collection

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from kafkalite.tools.common import ToolError


def scrape(urls: list[str], names: Collection[str], timeout: float) -> dict[str, list[Sample]]:
    """The samples of the metric families `names`, from every broker named."""
    found: dict[str, list[Sample]] = {name: [] for name in names}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                text = answer.read().decode("utf-8")
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read metrics from {url}: {exc}") from None
        for family in text_string_to_metric_families(text):
            if family.name in found:
                found[family.name].extend(family.samples)
    return found
