"""The counters the request path bumps: plain ints, only ever touched on the trio thread.

They are read on scrape by the collector, which also runs on the trio thread (the metrics
HTTP server is a trio task), so no locks are needed and an increment costs a dict lookup.
"""

from __future__ import annotations

import bisect
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kafkalite.metrics import topic_traffic
from kafkalite.metrics.loop_time import LoopTime
from kafkalite.metrics.topic_traffic import TopicStats

log = logging.getLogger("kafkalite.metrics")

# Request latency buckets in milliseconds (Kafka's RequestMetrics TotalTimeMs is in ms).
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


@dataclass(slots=True)
class LatencyHistogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    sum_ms: float = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        self.sum_ms += ms


# Yammer's histograms (Kafka's RequestMetrics) sample 1028 values; quantiles here come from
# the latest 1028 requests of each API (one deque append per request).
RECENT_REQUESTS = 1028


@dataclass(slots=True)
class RequestTimes(LatencyHistogram):
    """TotalTimeMs of one API: cumulative buckets, and the latest times for its quantiles."""

    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_REQUESTS))


@dataclass
class BrokerMetrics:
    topics: dict[str, TopicStats] = field(default_factory=dict)
    all_topics: TopicStats = field(default_factory=TopicStats)
    requests: dict[tuple[int, int], int] = field(default_factory=dict)  # (api key, version)
    latency: dict[int, RequestTimes] = field(default_factory=dict)  # api key
    loop: LoopTime = field(default_factory=LoopTime)  # the event loop's idle and handler time
    network_bytes_in: int = 0
    network_bytes_out: int = 0
    connections: int = 0
    connections_created: int = 0
    # Kafka's successful-/failed-authentication-total (a plaintext connection succeeds at once)
    successful_authentications: int = 0
    failed_authentications: int = 0
    successful_reauthentications: int = 0  # KIP-368
    failed_reauthentications: int = 0
    ready: bool = False

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def observe_request(
        self, broker: Any, api_key: int, api_version: int, seconds: float, body: Any, response: Any
    ) -> None:
        """One answered request: its rate, latency and, for Produce/Fetch, the topic meters."""
        key = (api_key, api_version)
        self.requests[key] = self.requests.get(key, 0) + 1
        histogram = self.latency.get(api_key)
        if histogram is None:
            histogram = self.latency[api_key] = RequestTimes()
        ms = seconds * 1000
        histogram.observe(ms)
        histogram.recent.append(ms)
        try:
            if api_key == topic_traffic.PRODUCE:
                topic_traffic.count_produce(self, broker, body, response)
            elif api_key == topic_traffic.FETCH and response is not None:
                topic_traffic.count_fetch(self, broker, body, response)
        except Exception:  # a metrics bug must never cost a client its connection
            log.exception("could not count api key %d v%d for metrics", api_key, api_version)
