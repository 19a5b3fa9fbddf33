"""The jobs on a real standalone Spark cluster and under spark-submit.

A master and two workers (1 core, 512m each) from pyspark's own distribution
(spark_jobs/standalone.py), on 127.0.0.1 and free ports, stopped after the module, also on
failure. The streaming job runs there through its `--master`; the batch report is submitted
with pyspark's own `bin/spark-submit` to the same master. Both against a kafkalite broker,
both checked exactly, and both must have run tasks on the workers' executors.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.events import expected_top_pages, expected_window_counts
from spark_jobs.generator import generate
from spark_jobs.jars import SetupError, resolve_jars
from spark_jobs.kafka_util import ensure_topic, read_topic
from spark_jobs.report import format_table
from spark_jobs.standalone import StandaloneCluster, spark_home

from .test_page_counts import REPO, START, last_counts

# The same jobs run in local mode in the default run (test_page_counts.py); this deployment
# variant is `extended`: `make test-extended` (and `make spark-test`) run it.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.extended]

EXECUTOR_CONF = ["spark.executor.memory=512m", "spark.executor.cores=1", "spark.cores.max=2"]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2)
    try:
        cluster.start()
    except SetupError as exc:
        pytest.skip(f"Spark unavailable: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


def run(command: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYSPARK_PYTHON": sys.executable,  # spark-submit's driver: else python3 on PATH
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
    )


def finished_tasks(cluster: StandaloneCluster, app_id: str) -> dict[int, int]:
    """Per worker, the tasks its executors of the application finished (their stderr)."""
    return {
        index: sum(
            log.read_text().count("Finished task")
            for log in cluster.worker_dir(index).glob(f"{app_id}/*/stderr")
        )
        for index in range(1, cluster.workers + 1)
    }


def application(cluster: StandaloneCluster, name: str) -> dict[str, Any]:
    [app] = [a for a in cluster.state()["completedapps"] if a["name"] == name]
    return app


def test_streaming_job_on_a_standalone_cluster(
    standalone: StandaloneCluster, module_broker: Any, topic_name: Any, tmp_path: Path
) -> None:
    bootstrap = module_broker.bootstrap
    events_topic, counts_topic = topic_name("events"), topic_name("counts")
    ensure_topic(bootstrap, counts_topic, partitions=2)
    events = generate(bootstrap, events_topic, 3000, seed=71, start_ts=START, partitions=3)
    command = [sys.executable, "-m", "spark_jobs.page_counts", "--master", standalone.master_url]
    command += ["--bootstrap", bootstrap, "--checkpoint", str(tmp_path / "checkpoint"), "--once"]
    command += ["--events-topic", events_topic, "--output-topic", counts_topic]
    command += ["--max-offsets-per-trigger", "1500"]
    for conf in EXECUTOR_CONF:
        command += ["--conf", conf]
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(r"page-counts: (\d+) events in (\d+) micro-batches", result.stdout)
    assert match, result.stdout
    assert int(match.group(1)) == 3000
    assert 2 <= int(match.group(2)) <= 3  # maxOffsetsPerTrigger splits it (rounding)

    assert last_counts(read_topic(bootstrap, counts_topic)) == expected_window_counts(events)
    app = application(standalone, "page-counts")
    assert (app["state"], app["cores"], app["memoryperexecutor"]) == ("FINISHED", 2, 512)
    tasks = finished_tasks(standalone, app["id"])
    assert all(count > 0 for count in tasks.values()), tasks  # both workers did work


def test_report_under_spark_submit(
    standalone: StandaloneCluster, module_broker: Any, topic_name: Any
) -> None:
    bootstrap = module_broker.bootstrap
    topic = topic_name("events")
    events = generate(bootstrap, topic, 2000, seed=72, start_ts=START, spacing_ms=4000)
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", standalone.master_url]
    command += ["--jars", resolve_jars().classpath]
    for conf in EXECUTOR_CONF:
        command += ["--conf", conf]
    command += [str(REPO / "spark_jobs" / "report.py"), "--bootstrap", bootstrap]
    command += ["--topic", topic, "--top", "3"]
    result = run(command)
    # spark-submit passes on the Python driver's stdout and stderr both on its stdout.
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert result.stdout.strip() == format_table(expected_top_pages(events, top=3))

    app = application(standalone, "page-report")
    assert app["state"] == "FINISHED"
    assert sum(finished_tasks(standalone, app["id"]).values()) > 0


def test_a_bad_master_is_refused_before_spark_starts(tmp_path: Path) -> None:
    commands = [
        ["spark_jobs.page_counts", "--checkpoint", str(tmp_path / "c"), "--once"],
        ["spark_jobs.report"],
    ]
    for command in commands:
        result = run(
            [sys.executable, "-m", *command, "--bootstrap", "127.0.0.1:1"]
            + ["--master", "spark:/one-slash"],
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines()[-1].endswith(
            "argument --master: 'spark:/one-slash': a master is local, local[N], "
            "spark://HOST:PORT, yarn or k8s://..."
        )
