"""`--secure` (chaos/security.py): the settings the brokers and the workload get (default
suite, no broker), and a short seeded run on 3 kafkalite brokers on SASL_SSL with ACLs
(about 75 s on 2 busy cores: `extended`, left out of `make test` for CI time; `make
test-extended` runs it): seed 3's 20 s schedule SIGKILLs the controller, under idempotent
acks=all producers and a consumer group logged in as the SCRAM user `chaos-client`, which
is not a super user (the harness checks that it may do nothing on the cluster). Exact
counts, as test_chaos_cluster_run.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from chaos.checker import MUST_BE_ZERO, read_jsonl
from chaos.runner import Options, run
from chaos.security import WORKLOAD_USER, generate_security
from chaos.test_chaos_run import assert_log_accounted_for, processes_mentioning
from chaos.workload import connection


def test_the_brokers_take_sasl_ssl_and_the_workload_logs_in_as_its_user(tmp_path: Path):
    security = generate_security(tmp_path)
    brokers = security.broker_overrides()
    assert brokers["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256"
    assert brokers["security.inter.broker.protocol"] == "SASL_SSL"
    assert brokers["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert WORKLOAD_USER not in brokers["super.users"]
    assert "bootstrap.servers" not in security.admin_config()
    args = argparse.Namespace(
        bootstrap="127.0.0.1:1", client_config=str(security.workload_config_file)
    )
    assert connection(args) == {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(security.cluster.ca_file),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": WORKLOAD_USER,
        "sasl.password": security.workload_password,
    }
    assert connection(argparse.Namespace(bootstrap="b:1", client_config="")) == {
        "bootstrap.servers": "b:1"
    }


@pytest.mark.slow
@pytest.mark.extended
def test_a_secure_three_broker_run_with_a_controller_kill_loses_nothing(tmp_path: Path):
    options = Options(duration=20, seed=3, faults=["kill"], brokers=3, runs_dir=tmp_path)
    options.secure = True
    run_dir, verdict = run(options)

    applied = read_jsonl(run_dir / "faults.jsonl")
    assert [(f["kind"], f["role"]) for f in applied] == [("kill", "controller")]
    assert not any(fault.get("skipped") for fault in applied)
    for key in MUST_BE_ZERO:
        assert verdict[key] == 0, (key, verdict["examples"][key])
    figures = verdict["figures"]
    assert figures["acked"] > 2_000, figures
    assert_log_accounted_for(figures)
    assert figures["acked_never_consumed"] == 0
    assert figures["final_read_complete"] is True
    assert json.loads((run_dir / "security" / "client.json").read_text())["sasl.username"] == (
        WORKLOAD_USER
    )
    assert verdict["ok"] is True
    assert processes_mentioning(str(run_dir)) == []
