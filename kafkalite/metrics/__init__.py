"""Prometheus metrics of the broker, named as the JMX exporter renders Kafka's MBeans.

`BrokerMetrics` holds the counters the request path bumps (per request or per partition,
never per record); `collector.BrokerCollector` turns them and the broker's state into
metric families on scrape; `http` serves `/metrics`, `/health` and `/ready` on the trio loop.
"""

from kafkalite.metrics.counters import BrokerMetrics

__all__ = ["BrokerMetrics"]
