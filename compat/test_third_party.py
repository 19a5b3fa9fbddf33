"""Third-party client test suites against kafkalite and Apache Kafka (CI entry point).

One test per (suite, target): a fresh broker with the suite's settings
(`run.overrides_for(target)`), then `run.main(bootstrap, target)`, which runs the client
library's own integration tests and returns their outcomes. The test fails when a test of the
suite's allowlist (compat/<suite>/tests.allow) does not pass: on kafkalite that is a
regression; on Kafka it means the allowlist holds something Kafka itself does not pass.

- kafka_python: kafka-python's integration suite from its PyPI sdist (about 50 s on kafkalite,
  30 s on Kafka; the first run also builds a venv under .cache/kafka_python/).
- franz_go: franz-go's kgo integration tests with `go test` (about 90 s on kafkalite, 100 s on
  Kafka; the first run downloads the module and compiles for about a minute, under .cache/go/).

`test_franz_go_secured_kafkalite` (extended: `make test-extended`) runs franz-go again over
TLS with its SCRAM tests.

Both are marked slow (`-m "not slow"` leaves them out); their Kafka side is also marked
`reference` (compat/conftest.py) and is left out of the default run: `make test-reference`.
Missing tools (go, java) or an unreachable package index fail the test with a one-line reason
(CompatSetupError).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from compat.kafka_dist import CompatSetupError
from compat.targets import running_target

SUITES = ("kafka_python", "franz_go")


@pytest.mark.slow
@pytest.mark.parametrize("suite", SUITES)
def test_third_party_suite(suite: str, target_name: str, tmp_path: Path) -> None:
    run = importlib.import_module(f"compat.{suite}.run")
    try:
        run.ensure_setup()  # downloads and builds (once) before the broker starts
        with running_target(target_name, tmp_path, run.overrides_for(target_name)) as target:
            counts = run.main(target.bootstrap, target_name)
    except CompatSetupError as exc:
        pytest.fail(f"{suite} on {target_name}: {exc}", pytrace=False)
    print(counts.summary())
    for note in counts.notes:
        print(f"  note: {note}")
    assert counts.allowed, f"compat/{suite}/tests.allow is empty"
    failures = [
        f"{test}: {counts.outcomes.get(test, 'not run')}" for test in counts.allowlist_failures
    ]
    assert not failures, (
        f"{len(failures)} allowlisted {suite} tests did not pass on {target_name}"
        f" (log: {counts.log}):\n" + "\n".join(failures)
    )


@pytest.mark.slow
@pytest.mark.extended
def test_franz_go_secured_kafkalite(tmp_path: Path) -> None:
    """franz-go's kgo tests over TLS (KGO_TEST_TLS, a trustme CA) with the SCRAM tests
    (KGO_TEST_SCRAM*, a SASL_PLAINTEXT listener): about as long as the plain run, hence
    extended; kafkalite only (compat/franz_go/tests_secured.allow)."""
    from compat.franz_go import run

    try:
        run.ensure_setup()
        with run.kafkalite_secured(tmp_path) as (bootstrap, secured):
            counts = run.main(bootstrap, "kafkalite", secured)
    except CompatSetupError as exc:
        pytest.fail(f"franz_go secured: {exc}", pytrace=False)
    print(counts.summary())
    for note in counts.notes:
        print(f"  note: {note}")
    assert counts.allowed, "compat/franz_go/tests_secured.allow is empty"
    failures = [
        f"{test}: {counts.outcomes.get(test, 'not run')}" for test in counts.allowlist_failures
    ]
    assert not failures, (
        f"{len(failures)} allowlisted franz-go tests did not pass over TLS/SCRAM"
        f" (log: {counts.log}):\n" + "\n".join(failures)
    )
