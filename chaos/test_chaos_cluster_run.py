"""A short seeded chaos run against 3 kafkalite brokers on a real ZooKeeper (about 2 minutes):
SIGKILL of a partition's leader and of the controller, SIGSTOP/SIGCONT shorter
and longer than the session timeout, SIGTERM restarts, two rolling restarts, ZooKeeper killed
and restarted, a proxy link drop, and a broker cut off from the others, under idempotent
acks=all producers and a consumer group. Nothing acknowledged may be lost, duplicated or
reordered: exact counts. (Seed 20's 110 s schedule holds every kind, both pause lengths and the
leader and controller kill roles; the longer run, seed 43 for 180 s with every kind twice and
the three kill roles, is in chaos/README.md.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from chaos.checker import read_jsonl
from chaos.runner import Options, run
from chaos.test_chaos_run import assert_log_accounted_for, processes_mentioning

pytestmark = pytest.mark.slow

FAULTS = ["kill", "pause", "term", "rolling", "zookeeper", "drop", "partition"]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    runs = tmp_path_factory.mktemp("chaos-cluster")
    options = Options(duration=110, seed=20, faults=FAULTS, brokers=3, runs_dir=runs)
    return run(options)  # its summary shows with a failure, or with -rP


def test_the_schedule_applied_every_kind_and_both_kill_roles(cluster_run):
    run_dir, _ = cluster_run
    applied = read_jsonl(run_dir / "faults.jsonl")
    kinds = Counter(fault["kind"] for fault in applied)
    assert kinds == {"kill": 2, "partition": 1, "pause": 2, "term": 2, "rolling": 1,
                     "zookeeper": 1, "drop": 1}  # fmt: skip
    assert sorted(f["role"] for f in applied if f["kind"] == "kill") == ["controller", "leader"]
    assert sorted(f["hold"] for f in applied if f["kind"] == "pause") == [3.0, 9.0]
    assert not any(fault.get("skipped") for fault in applied)


def test_a_seeded_three_broker_run_loses_duplicates_and_reorders_nothing(cluster_run):
    run_dir, verdict = cluster_run
    figures = verdict["figures"]
    assert figures["acked"] > 9_000, figures
    assert verdict["acked_lost"] == 0
    assert verdict["acked_moved"] == 0
    assert verdict["duplicates"] == 0
    assert verdict["order_violations"] == 0
    assert verdict["unacked_disallowed"] == 0
    assert verdict["read_not_in_log"] == 0
    assert verdict["stalls"] == 0
    # Everything in the log was acknowledged, ambiguous or resent; the group read all of it.
    assert_log_accounted_for(figures)
    assert figures["acked_never_consumed"] == 0
    assert figures["final_read_complete"] is True
    assert all(f["recover_s"] is not None for f in verdict["faults"])
    assert (run_dir / "plot.png").stat().st_size > 10_000
    assert processes_mentioning(str(run_dir)) == []  # brokers, ZooKeeper, clients all stopped


def test_committed_offsets_never_go_backwards(cluster_run):
    _, verdict = cluster_run
    assert verdict["commit_regressions"] == 0, verdict["examples"]["commit_regressions"][:3]
    assert verdict["ok"] is True
