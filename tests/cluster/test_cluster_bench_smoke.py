"""The 3-broker benchmark's harness (bench/cluster_bench.py) on a tiny run against a kafkalite
cluster: every figure it reports is there, and the failover leaves no acks=all write
unacknowledged. The benchmark itself (`make bench`) is not part of the tests."""

from __future__ import annotations

import pytest
from cluster_helpers import StartBrokers

from bench.cluster_bench import RunningCluster, Workload, measure_failover, measure_workload

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow


def test_the_cluster_benchmark_measures_throughput_latency_and_failover(
    start_brokers: StartBrokers,
) -> None:
    settings = {"min.insync.replicas": "2", "zookeeper.session.timeout.ms": "18000"}
    # Teardown only: no controlled shutdown retrying for the killed broker.
    brokers = start_brokers({**settings, "controlled.shutdown.enable": "false"})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    cluster = RunningCluster(bootstrap, lambda broker_id: brokers[broker_id].kill())

    figures = measure_workload(bootstrap, Workload("100B-8p", 100, 8, 2000), 0.2)
    for acks in ("1", "all"):
        assert figures[acks]["mb_s"] > 0
        assert figures[acks]["latency_fixed_rate"]["samples"] == 200
    failover = measure_failover(cluster)
    assert failover["failed"] == 0 and failover["undelivered"] == 0
    print(f"\nfailover in the benchmark harness: {failover['failover_s']:.2f} s")
