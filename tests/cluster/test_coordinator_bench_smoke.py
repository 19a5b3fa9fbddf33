"""The coordinator benchmark's harness (bench/coordinator_bench.py, bench/txn_copy.py) on a tiny
run against a kafkalite cluster: every group figure is there, a rebalance settles, and the
transactional copy loop copies every record once. Reading Kafka's TransactionalMessageCopier
output is checked on lines it printed. The benchmark itself is not part of the tests."""

from __future__ import annotations

import json

import pytest
from cluster_helpers import StartBrokers

from bench.coordinator_bench import measure_copy, measure_group, measure_rebalance
from bench.txn_copy import java_copier_result

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow

# Kafka 4.3.1's copier, 600 records (its JSON status lines; "time" is the JVM's wall clock).
COPIER_OUTPUT = "\n".join(
    json.dumps(
        {
            "transactionalId": "copier-1",
            "stage": stage,
            "time": f"2026/11/27 {time}",
            "totalProcessed": done,
            "consumed": done,
            "remaining": 600 - done,
        }
    )
    for stage, time, done in (
        ("ProcessLoop", "10:01:59:879", 0),
        ("ProcessLoop", "10:01:59:901", 0),  # a poll that returned nothing
        ("ProcessLoop", "10:02:00:019", 200),
        ("ProcessLoop", "10:02:01:238", 400),
        ("ShutdownComplete", "10:02:02:379", 600),
    )
)


def test_the_copier_rate_is_taken_from_its_first_loop_to_its_exit() -> None:
    result = java_copier_result(COPIER_OUTPUT, 600)
    assert (result.records, result.transactions) == (600, 3)
    assert result.seconds == pytest.approx(2.5)
    assert result.records_per_s == pytest.approx(240)
    assert sorted(result.per_transaction.values) == pytest.approx([0.118, 1.141, 1.219])
    with pytest.raises(RuntimeError, match="copied 600 of 800"):
        java_copier_result(COPIER_OUTPUT, 800)


def test_the_coordinator_benchmark_measures_groups_a_rebalance_and_a_copy(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers(
        {
            "min.insync.replicas": "2",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
        }
    )
    bootstrap = ",".join(b.bootstrap for b in brokers.values())

    group = measure_group(bootstrap, cycles=3, commits=5)
    assert [group[k]["samples"] for k in ("join_sync", "join", "sync")] == [3, 3, 3]
    assert group["offset_commit"]["samples"] == 5
    rebalance = measure_rebalance(bootstrap, consumers=2, rounds=1)
    assert len(rebalance["rounds_ms"]) == 1 and rebalance["median_ms"] > 0
    copy = measure_copy(bootstrap, 400, "python")
    assert copy["records"] == 400 and copy["transactions"] >= 2  # up to 200 per transaction
    assert set(copy["steps"]) == {"produce", "flush", "send_offsets", "commit"}
