"""A short seeded chaos run against 3 kafkalite brokers on a real ZooKeeper (about 3 minutes):
SIGKILL of a partition's leader, of a follower and of the controller, SIGSTOP/SIGCONT shorter
and longer than the session timeout, SIGTERM restarts, two rolling restarts, ZooKeeper killed
and restarted twice, proxy link drops, and a broker cut off from the others, under idempotent
acks=all producers and a consumer group. Nothing acknowledged may be lost, duplicated or
reordered: exact counts. (Seed 43's 180 s schedule holds every kind at least twice and the
three kill roles.)"""

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
    options = Options(duration=180, seed=43, faults=FAULTS, brokers=3, runs_dir=runs)
    return run(options)  # its summary shows with a failure, or with -rP


def test_the_schedule_applied_every_kind_and_the_three_kill_roles(cluster_run):
    run_dir, _ = cluster_run
    applied = read_jsonl(run_dir / "faults.jsonl")
    kinds = Counter(fault["kind"] for fault in applied)
    assert kinds == {"kill": 3, "partition": 3, "pause": 2, "term": 2, "rolling": 2,
                     "zookeeper": 2, "drop": 2}  # fmt: skip
    assert sorted(f["role"] for f in applied if f["kind"] == "kill") == [
        "controller", "follower", "leader",
    ]  # fmt: skip
    assert sorted(f["hold"] for f in applied if f["kind"] == "pause") == [3.0, 9.0]
    assert not any(fault.get("skipped") for fault in applied)


def test_a_seeded_three_broker_run_loses_duplicates_and_reorders_nothing(cluster_run):
    run_dir, verdict = cluster_run
    figures = verdict["figures"]
    assert figures["acked"] > 15_000, figures
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
