"""The registry a broker's /metrics renders: its collector plus the process's own figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from kafkalite.metrics.collector import BrokerCollector

if TYPE_CHECKING:
    from kafkalite.broker.broker import Broker


def metrics_registry(broker: Broker) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, broker.config.listeners[0].name))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, resident memory, fds
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
