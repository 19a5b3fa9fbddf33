"""A short seeded chaos run on a tiered topic (40-50 s): one kafkalite node tiering to a
real S3 server (gofakes3), seed 22's schedule of 24 s: the store SIGKILLed for 2.2 s and
started again on its port and data, then a SIGKILL of the broker. Exact counts as in
test_chaos_run.py, and the store was really used: the final drain read from offset 0 the
records that were only in S3 (below the local log start), and segments were uploaded after
the store came back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.checker import MUST_BE_ZERO, read_jsonl
from chaos.runner import Options, run
from chaos.test_chaos_run import assert_log_accounted_for, processes_mentioning
from kafkalite.maven_dist import ProvisionError
from kafkalite.s3_server import ensure_gofakes3

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _gofakes3() -> None:
    try:
        ensure_gofakes3()
    except ProvisionError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no S3 test server: {exc}")


def test_a_tiered_run_with_the_store_killed_loses_nothing_and_reads_back_from_s3(tmp_path: Path):
    options = Options(duration=24, seed=22, faults=["s3", "kill"], brokers=1, runs_dir=tmp_path)
    run_dir, verdict = run(options)

    applied = read_jsonl(run_dir / "faults.jsonl")
    kinds = [(f["kind"], f["params"].get("mode")) for f in applied]
    assert kinds == [("s3", "down"), ("kill", None)]
    assert not any(fault.get("skipped") for fault in applied)
    for key in MUST_BE_ZERO:
        assert verdict[key] == 0, (key, verdict["examples"][key])
    figures, tier = verdict["figures"], verdict["tiered"]
    assert figures["acked"] > 3_000, figures
    assert_log_accounted_for(figures)
    assert figures["acked_never_consumed"] == 0
    # Most records were only in S3 at the end, and the drain read them through the broker.
    assert tier["read_below_local_start"] > figures["in_log"] // 2, tier
    assert tier["s3_faults_applied"] == 1
    assert tier["uploads_after_last_s3_heal"] > 0, tier  # the uploads resumed
    assert tier["used"] is True
    assert verdict["ok"] is True
    assert processes_mentioning(str(run_dir)) == []  # brokers, clients and the store stopped
