"""kafka-python's admin suite (test_admin_integration.py, from the same sdist as run.py) against
a 3-broker kafkalite cluster (compat.cluster_targets), issue 13 point 6:

    python -m compat.kafka_python.cluster [--update-allowlist]

prints the counts and exits 1 when a test of `cluster_tests.allow` does not pass. The suite is
pointed at broker 1 (KAFKA_URI takes one broker; the client discovers the others). The cluster
gets run.py's overrides (4 partitions per topic, 1 s minimum sessions) on top of the cluster
defaults (replication factor 3), without its authorizer (see `cluster_overrides`). Not run
against Kafka: compat/test_cluster_diff.py compares the two clusters; what fails here and why
is in compat/FINDINGS.md. CI: compat/test_kafka_python_cluster.py (slow, about 40 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from compat.cluster_targets import running_cluster
from compat.kafka_python import run
from compat.kafka_python.common import Counts, report_allowlist

ALLOWLIST = run.HERE / "cluster_tests.allow"
TEST_FILES = ("test/integration/test_admin_integration.py",)
ALLOWLIST_HEADER = f"""
kafka-python {run.KAFKA_PYTHON_VERSION} admin tests that MUST pass on a 3-broker kafkalite cluster
(python -m compat.kafka_python.cluster; regenerate with --update-allowlist).
Tests not listed fail on the cluster: compat/FINDINGS.md says why.
Left out although they may pass: test_delete_records (one poll must return all 6 partitions,
which a consumer fetching from 3 leaders does not promise) and test_alter_replica_log_dirs
(passes when partition 0 of its 1-replica topic happens to be on the first broker asked).
"""
# Outcomes that depend on timing or placement on a cluster: never allowlisted.
UNSTABLE = (
    "test_admin_integration.py::test_delete_records",
    "test_admin_integration.py::test_alter_replica_log_dirs",
)


def cluster_overrides() -> dict[str, str]:
    """run.py's, without its authorizer: on the cluster its ACL test reads ACLs that reach
    the brokers asynchronously (never allowlisted), and one run in 3 with it saw
    describe_topic_partitions get 2 of 4 partitions (compat/FINDINGS.md), not yet understood."""
    return {k: v for k, v in run.overrides_for("kafkalite").items() if k not in run.AUTHORIZER}


def run_on_cluster(data_dir: Path) -> Counts:
    with running_cluster("kafkalite", data_dir, cluster_overrides()) as cluster:
        return run.main(
            cluster.bootstrap_of(1),
            "kafkalite",
            test_files=TEST_FILES,
            allowlist=ALLOWLIST,
            log_name="kafkalite-cluster",
        )


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compat.kafka_python.cluster", description=__doc__)
    parser.add_argument("--update-allowlist", action="store_true")
    args = parser.parse_args(argv)
    run.ensure_setup()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafka-python-cluster-") as tmp:
        counts = run_on_cluster(Path(tmp))
    print(f"{counts.summary()} (with cluster: {time.monotonic() - started:.0f}s)")
    return report_allowlist(
        counts,
        ALLOWLIST,
        ALLOWLIST_HEADER,
        args.update_allowlist,
        "on the cluster",
        unstable=UNSTABLE,
    )


if __name__ == "__main__":
    sys.exit(cli())
