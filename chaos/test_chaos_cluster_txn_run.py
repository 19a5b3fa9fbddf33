"""A short seeded transactional run against 3 kafkalite brokers on a real ZooKeeper (about 2
minutes): the consume-transform-produce workload (`--workload txn`) under seed 43's 60 s
schedule of a broker cut off from the others, a 3 s pause of the controller, ZooKeeper
killed and restarted, and a proxy drop together with a SIGKILL of a partition's leader.
Exactly once through the transform: every input record once in the committed output, and
the transform group's offsets at the input's ends. Exact counts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from chaos.checker import TXN_MUST_BE_ZERO, read_jsonl
from chaos.runner import Options, run
from chaos.test_chaos_run import assert_log_accounted_for, processes_mentioning

pytestmark = pytest.mark.slow

FAULTS = ["kill", "pause", "term", "zookeeper", "drop", "partition"]


def test_a_seeded_three_broker_transactional_run_is_exactly_once(tmp_path: Path):
    options = Options(duration=60, seed=43, faults=FAULTS, brokers=3, workload="txn",
                      runs_dir=tmp_path)  # fmt: skip
    run_dir, verdict = run(options)

    applied = read_jsonl(run_dir / "faults.jsonl")
    assert Counter(fault["kind"] for fault in applied) == {
        "partition": 1, "pause": 1, "zookeeper": 1, "drop": 1, "kill": 1,
    }  # fmt: skip
    assert not any(fault.get("skipped") for fault in applied)
    figures, txn = verdict["figures"], verdict["txn_figures"]
    assert figures["acked"] > 5_000, figures
    assert_log_accounted_for(figures)
    for key in ("acked_lost", "duplicates", "order_violations", "unacked_disallowed",
                *TXN_MUST_BE_ZERO):  # fmt: skip
        assert verdict[key] == 0, (key, verdict["examples"][key])
    assert txn["output_committed"] == txn["input_records"] == figures["in_log"]
    assert verdict["ok"] is True
    assert processes_mentioning(str(run_dir)) == []  # brokers, ZooKeeper, clients all stopped
