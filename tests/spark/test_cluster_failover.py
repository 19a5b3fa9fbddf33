"""The streaming pipeline on a replicated kafkalite cluster (a real ZooKeeper, 3 brokers,
replication factor 3, min.insync.replicas 2) while the leader of an input partition is
SIGKILLed mid-stream: the query keeps going and every window count stays exact.

The Kafka source reads from the new leader once the controller has moved the leadership
(within the ZooKeeper session timeout, 4 s here); the Kafka sink's producer (acks=all,
idempotent) retries its writes there. A micro-batch retried after a failed task writes the
same running counts again, so the last record of every (window, page) is still exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from kafkalite.cluster.launcher import LocalCluster
from spark_jobs.events import expected_window_counts
from spark_jobs.generator import generate
from spark_jobs.kafka_util import end_offsets, ensure_topic, read_topic
from spark_jobs.page_counts import start_query, stop_between_batches
from tests.integration.e2e_helpers import wait_until

from .test_page_counts import START, last_counts

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EVENTS, COUNTS = "events", "page-counts"
FIRST, SECOND = 3000, 2000
PER_TRIGGER = 500  # the first events alone take 6 micro-batches
WAIT = 180.0


def poll(condition: Callable[[], Any], what: str, wait: float = WAIT) -> Any:
    return wait_until(condition, wait, 0.2, what)


def input_partitions(bootstrap: str) -> dict[int, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return dict(admin.list_topics(EVENTS, timeout=10).topics[EVENTS].partitions)


def committed_input(query: Any) -> dict[int, int]:
    """The source offsets the last finished micro-batch reached (the query must run)."""
    assert query.isActive, f"the query stopped: {query.exception()}"
    progress = query.lastProgress
    if not progress:
        return {}
    end = progress["sources"][0]["endOffset"] or "{}"
    end = json.loads(end) if isinstance(end, str) else end  # Spark's offset JSON
    return {int(p): offset for p, offset in end.get(EVENTS, {}).items()}


def test_streaming_query_survives_killing_an_input_leader(
    spark: Any, replicated_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = replicated_cluster({"zookeeper.session.timeout.ms": "4000"})
    bootstrap = cluster.bootstrap
    ensure_topic(bootstrap, COUNTS, partitions=2)
    first = generate(bootstrap, EVENTS, FIRST, seed=61, start_ts=START, partitions=3)
    partitions = input_partitions(bootstrap)
    assert all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in partitions.values())

    query = start_query(
        spark,
        bootstrap,
        str(tmp_path / "checkpoint"),
        events_topic=EVENTS,
        output_topic=COUNTS,
        max_offsets_per_trigger=PER_TRIGGER,
        trigger_interval="1 second",
    )
    try:
        # Mid-stream: a micro-batch is done, most of the backlog still to come.
        poll(lambda: 0 < sum(committed_input(query).values()) < FIRST, "the first micro-batch")
        leader = partitions[0].leader
        cluster.brokers[leader - 1].kill()
        survivors = ",".join(b.bootstrap for i, b in enumerate(cluster.brokers, 1) if i != leader)
        poll(
            lambda: input_partitions(survivors)[0].leader not in (-1, leader),
            "a new leader of events-0",
        )
        # More events during and after the failover, into the windows the first ones reach.
        second = generate(survivors, EVENTS, SECOND, seed=62, start_ts=START + 240_000)
        ends = end_offsets(survivors, EVENTS)
        assert sum(ends.values()) == FIRST + SECOND
        poll(lambda: committed_input(query) == ends, "the query to reach the end of events")
        assert query.isActive and query.exception() is None
    finally:
        stop_between_batches(query)

    counts = last_counts(read_topic(survivors, COUNTS))
    expected = expected_window_counts(first + second)
    assert set(expected_window_counts(first)) & set(expected_window_counts(second))
    assert counts == expected
    processed = sum(p["numInputRows"] for p in query.recentProgress)
    assert processed == FIRST + SECOND
