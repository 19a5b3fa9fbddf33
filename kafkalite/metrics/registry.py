"""What a broker's /metrics renders: its collector plus the process's own figures.

The broker's families are collected on the trio thread (a consistent read of broker state,
about a millisecond); rendering them as text, the bulk of a scrape's cost, runs in a worker
thread so a large scrape never stalls the loop for its whole duration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from kafkalite.metrics.collector import BrokerCollector

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from kafkalite.broker.broker import Broker


class _Collected(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


class Exposition:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, broker: Broker, api_names: Mapping[int, str]) -> None:
        """`api_names`: API key -> Kafka's name, for the `request` label (from the server's
        handler table)."""
        self.collector = BrokerCollector(broker, broker.config.listeners[0].name, api_names)

    def collect(self) -> list[Metric]:
        """On the trio thread."""
        return list(self.collector.collect())

    @staticmethod
    def render(families: list[Metric]) -> bytes:
        """In a worker thread: the collected families plus process, platform and GC figures."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collected(families))
        ProcessCollector(registry=registry)  # process_cpu_seconds_total, resident memory, fds
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        return generate_latest(registry)
