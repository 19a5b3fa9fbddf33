"""kafka-python 3.0.12's admin suite on a 3-broker kafkalite cluster (issue 13 point 6):
every test of compat/kafka_python/cluster_tests.allow must pass (compat/kafka_python/cluster.py;
about 40 s, the first run also builds the venv under .cache/kafka_python/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.kafka_dist import CompatSetupError
from compat.kafka_python import cluster, run


@pytest.mark.slow
def test_kafka_python_admin_suite_on_the_cluster(tmp_path: Path) -> None:
    try:
        run.ensure_setup()
        counts = cluster.run_on_cluster(tmp_path)
    except CompatSetupError as exc:
        pytest.fail(f"kafka-python on the kafkalite cluster: {exc}", pytrace=False)
    print(counts.summary())
    assert counts.allowed, "compat/kafka_python/cluster_tests.allow is empty"
    failures = [
        f"{test}: {counts.outcomes.get(test, 'not run')}" for test in counts.allowlist_failures
    ]
    assert not failures, (
        f"{len(failures)} allowlisted kafka-python admin tests did not pass on the cluster"
        f" (log: {counts.log}):\n" + "\n".join(failures)
    )
