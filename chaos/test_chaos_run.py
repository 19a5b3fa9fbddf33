"""A short seeded chaos run against one kafkalite node (about 70 s): each fault once,
SIGKILL + restart, SIGSTOP/SIGCONT longer than the session timeout, SIGTERM restart, and
proxy link drops, latency and a one-way blackhole, under idempotent acks=all producers and a
consumer group. Nothing acknowledged may be lost, duplicated or reordered: exact counts.
(Seed 2's 60 s schedule holds every kind once; a pause shorter than the session timeout is
in the transactional run below, more kills and pauses in the tiered and share-group runs,
and `python -m chaos --duration 120 --seed 2` is the earlier run with every kind twice.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.checker import TXN_MUST_BE_ZERO, read_jsonl
from chaos.runner import Options, run

pytestmark = pytest.mark.slow

FAULTS = ["kill", "pause", "term", "drop", "latency", "blackhole"]


def assert_log_accounted_for(figures: dict) -> None:
    """Every record in the log was acknowledged, ambiguous, or a copy a later producer epoch
    wrote again (the client's resend, chaos.producer_sessions): exact counts."""
    expected = figures["acked"] + figures["unacked_allowed"] + figures["resent_copies"]
    assert figures["in_log"] == expected, figures


def processes_mentioning(text: str) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if text.encode() in cmdline.read():
                    pids.append(int(pid))
        except OSError:
            continue
    return pids


def test_a_seeded_single_node_run_loses_duplicates_and_reorders_nothing(tmp_path: Path):
    options = Options(duration=60, seed=2, faults=FAULTS, brokers=1, runs_dir=tmp_path)
    run_dir, verdict = run(options)  # its summary shows with the failure, or with -rP

    applied = read_jsonl(run_dir / "faults.jsonl")
    assert sorted(fault["kind"] for fault in applied) == sorted(FAULTS)
    assert [f["hold"] for f in applied if f["kind"] == "pause"] == [9.0]  # session 6 s
    assert not any(fault.get("skipped") for fault in applied)
    figures = verdict["figures"]
    assert figures["acked"] > 5_000, figures
    assert verdict["acked_lost"] == 0
    assert verdict["acked_moved"] == 0
    assert verdict["duplicates"] == 0
    assert verdict["order_violations"] == 0
    assert verdict["unacked_disallowed"] == 0
    assert verdict["read_not_in_log"] == 0
    assert verdict["commit_regressions"] == 0
    assert verdict["stalls"] == 0
    # Everything in the log was acknowledged, ambiguous or resent; the group read all of it.
    assert_log_accounted_for(figures)
    assert figures["acked_never_consumed"] == 0
    assert all(f["recover_s"] is not None for f in verdict["faults"])
    assert verdict["ok"] is True
    assert (run_dir / "plot.png").stat().st_size > 10_000
    assert processes_mentioning(str(run_dir)) == []  # brokers and clients all stopped


def test_a_seeded_single_node_transactional_run_is_exactly_once(tmp_path: Path):
    """The transactional consume-transform-produce workload (seed 2 for 40 s: a SIGKILL, a
    9 s pause against a 6 s session, a SIGTERM; seed 6 for 60 s, with a second pause and
    SIGTERM, is in chaos/README.md): each input record exactly once in the committed output,
    and the transform group's offsets at the input's end."""
    options = Options(duration=40, seed=2, faults=["kill", "term", "pause"], brokers=1,
                      workload="txn", runs_dir=tmp_path)  # fmt: skip
    run_dir, verdict = run(options)

    applied = read_jsonl(run_dir / "faults.jsonl")
    assert sorted(fault["kind"] for fault in applied) == ["kill", "pause", "term"]
    figures, txn = verdict["figures"], verdict["txn_figures"]
    assert figures["acked"] > 3_000, figures
    assert_log_accounted_for(figures)
    for key in ("acked_lost", "duplicates", "order_violations", "unacked_disallowed",
                *TXN_MUST_BE_ZERO):  # fmt: skip
        assert verdict[key] == 0, (key, verdict["examples"][key])
    assert txn["output_committed"] == txn["input_records"] == figures["in_log"]
    assert verdict["ok"] is True
    assert processes_mentioning(str(run_dir)) == []
