"""kafka-python 3.0.12's SASL (PLAIN, SCRAM-SHA-256/512) and SSL integration tests against
kafkalite (issue 20): every test of compat/kafka_python/security_tests.allow must pass
(compat/kafka_python/security.py). CI lists topics with kafka-python's admin client instead of
three kafka-topics.sh JVMs (about 20 s on kafkalite);
`python -m compat.kafka_python.security` runs the suite with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.kafka_dist import CompatSetupError
from compat.kafka_python import security


@pytest.mark.slow
def test_kafka_python_sasl_and_ssl_suite(tmp_path: Path) -> None:
    try:
        security.ensure_setup()
        counts = security.run_secure(tmp_path, java_tool=False)
    except CompatSetupError as exc:
        pytest.fail(f"kafka-python's security tests on kafkalite: {exc}", pytrace=False)
    print(counts.summary())
    assert counts.allowed, "compat/kafka_python/security_tests.allow is empty"
    failures = [
        f"{test}: {counts.outcomes.get(test, 'not run')}" for test in counts.allowlist_failures
    ]
    assert not failures, (
        f"{len(failures)} allowlisted kafka-python security tests did not pass"
        f" (log: {counts.log}):\n" + "\n".join(failures)
    )
