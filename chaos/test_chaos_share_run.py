"""A short seeded chaos run of the share-group workload against one kafkalite node (about 40 s):
seed 10 pauses the broker for 9 s (past the 6 s share session) at 8 s and SIGKILLs it at 19 s,
under two ShareConsumers ACCEPTing every record explicitly. Exact counts: every acknowledged
record delivered, none delivered again after its ACCEPT was answered, none accepted twice, and
at the end the share group has acknowledged exactly the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.checker import read_jsonl
from chaos.runner import Options, run
from chaos.share import SHARE_MUST_BE_ZERO
from chaos.test_chaos_run import assert_log_accounted_for, processes_mentioning

pytestmark = pytest.mark.slow


def test_a_seeded_share_group_run_accepts_each_record_of_the_log_once(tmp_path: Path):
    options = Options(duration=30, seed=10, faults=["kill", "pause"], brokers=1,
                      workload="share", runs_dir=tmp_path)  # fmt: skip
    run_dir, verdict = run(options)

    applied = read_jsonl(run_dir / "faults.jsonl")
    assert [(f["kind"], f["hold"]) for f in applied] == [("pause", 9.0), ("kill", 0.55)]
    assert not any(fault.get("skipped") for fault in applied)
    figures, share = verdict["figures"], verdict["share_figures"]
    assert figures["acked"] > 4_000, figures
    assert_log_accounted_for(figures)
    for key in ("acked_lost", "duplicates", "order_violations", "unacked_disallowed",
                *SHARE_MUST_BE_ZERO):  # fmt: skip
        assert verdict[key] == 0, (key, verdict["examples"][key])
    # Each record of the log delivered and accepted, nothing else; an ACCEPT whose answer a
    # kill lost (written, then killed) is acknowledged at the end without a successful answer.
    assert share["offsets_known"] is True
    assert share["distinct_delivered"] == figures["in_log"]
    assert share["accepted"] + share["accepted_unanswered"] == figures["in_log"]
    assert share["deliveries"] == share["distinct_delivered"] + share["redeliveries"]
    assert verdict["ok"] is True
    assert processes_mentioning(str(run_dir)) == []
