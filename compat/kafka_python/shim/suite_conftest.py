"""kafkalite compat runner: test/conftest.py for kafka-python's integration suite.

The sdist ships no test/conftest.py; this one is copied there by compat/kafka_python/run.py.

- Producers block at most 15 s (not 60 s) in init_transactions() and friends, so the
  transactional tests fail fast on a broker without a transaction coordinator.
- Every test's outcome is appended as one JSON line to $KAFKALITE_COMPAT_REPORT (setup and
  teardown failures are errors, as pytest counts them), so a crashed run still reports.
"""

import json
import os

from kafka import KafkaProducer

KafkaProducer.DEFAULT_CONFIG["max_block_ms"] = 15000


def pytest_runtest_logreport(report):
    path = os.environ.get("KAFKALITE_COMPAT_REPORT")
    if not path:
        return
    if report.when == "call":
        outcome = report.outcome
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    with open(path, "a") as handle:
        handle.write(
            json.dumps({"nodeid": report.nodeid, "when": report.when, "outcome": outcome}) + "\n"
        )
