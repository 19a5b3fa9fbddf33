"""The loop-time instrument (metrics/loop_time.py: the idle-percent metrics) runs only while
the metrics are served: a broker without kafkalite.metrics.port pays nothing per scheduler
round or per request for it (its handlers are awaited directly, not step by step)."""

from __future__ import annotations

from pathlib import Path

from kafkalite.testing import EmbeddedBroker, free_ports


def test_the_loop_is_timed_only_while_metrics_are_served(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "plain") as plain:
        assert not plain.call(lambda: plain.broker.metrics.loop.enabled)
    (port,) = free_ports(1)
    with EmbeddedBroker(tmp_path / "served", {"kafkalite.metrics.port": str(port)}) as served:
        assert served.call(lambda: served.broker.metrics.loop.enabled)
