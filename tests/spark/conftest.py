"""Fixtures of the Spark suites: one SparkSession per module, brokers to run the jobs against.

- `spark`: a local SparkSession with the Kafka connector (spark_jobs.session), one per test
  module (JVM startup takes seconds), stopped with its JVM at module end. Without Java >= 17
  (or, before the connector jars are cached, Maven) the tests are skipped with that reason.
- `kafka_target`: a `SparkTarget` (name, bootstrap, processes): a kafkalite broker (through
  tests/conftest.py's module_broker_factory), a replicated kafkalite cluster (`cluster`: a
  real ZooKeeper and 3 brokers, kafkalite.cluster.launcher's topology, with
  default.replication.factor 3 and min.insync.replicas 2, so every topic the jobs create
  has 3 replicas) and a real Apache Kafka broker (compat/targets.py; its tests marked
  `kafka`); one per module and target. Tests keep apart through their own topics.
- `replicated_cluster`: such a cluster, started by the caller (tests that kill brokers).
- `broker_log_clean` (autouse): on kafkalite, the test fails if a broker logged an ERROR
  or a traceback meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat.targets import running_target
from kafkalite.cluster.launcher import LocalCluster
from kafkalite.testing import BrokerProcess, error_records
from spark_jobs.jars import SetupError

TARGET_PARAMS = [
    pytest.param("kafkalite", id="kafkalite"),
    pytest.param("cluster", id="cluster"),
    # The same jobs on Kafka confirm the expected figures there: `make test-reference`.
    pytest.param("kafka", id="kafka", marks=[pytest.mark.kafka, pytest.mark.reference]),
]
# Slow duplicates of a variant the default run keeps: `extended` (make test-extended).
EXTENDED = {
    # The checkpoint restart on the cluster (about 47 s): the single node runs it, and
    # test_cluster_failover.py restarts a query on the cluster with a leader killed.
    "test_restart_from_checkpoint_processes_only_new_events[cluster]",
    # test_queue_features.py (views, delayed delivery, tiered storage read by Spark): its own
    # SparkSession costs about 60 s of start-up and first query, more than CI's budget
    # allows; the broker paths it reads have their own tests in the default run (the lz4
    # frame regression of its view read in tests/storage/test_topic_compression.py).
    "test_view_batch_read_equals_client_side_filter",
    "test_view_streaming_read_with_checkpoint_equals_client_side_filter",
    "test_delayed_records_appear_in_a_batch_read_at_their_due_time",
    "test_batch_read_from_offset_0_of_a_tiered_topic",
}
OFFSETS_TOPIC = "__consumer_offsets"
# Replicated topics as issue 13's durability promise has them.
REPLICATED = {"default.replication.factor": "3", "min.insync.replicas": "2"}


@dataclass(frozen=True)
class SparkTarget:
    name: str
    bootstrap: str
    processes: tuple[BrokerProcess, ...] = ()  # kafkalite's broker processes


def start_cluster(data_dir: Path, overrides: Mapping[str, str] | None = None) -> LocalCluster:
    """A real ZooKeeper and 3 brokers with REPLICATED, all registered (stopped on failure)."""
    cluster = LocalCluster(data_dir, 3, {**REPLICATED, **(overrides or {})}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < 3:
            assert time.monotonic() < deadline, "3 brokers did not register within 60s"
            time.sleep(0.1)
        create_offsets_topic(cluster, deadline)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def create_offsets_topic(cluster: LocalCluster, deadline: float) -> None:
    """Have `__consumer_offsets` created (a group lookup) and known to every broker before
    the tests: brokers asked for a coordinator at once each try to create it, and the losers
    log an ERROR for TOPIC_ALREADY_EXISTS (a broker bug, reported; Kafka takes it as done),
    which broker_log_clean would blame on the test that read with a group first."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "spark-tests"})
    try:
        consumer.committed([TopicPartition("spark-tests", 0)], timeout=60)
    finally:
        consumer.close()
    for broker in cluster.brokers:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        while OFFSETS_TOPIC not in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, f"{OFFSETS_TOPIC} not created within 60s"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def spark(module_broker_factory: Any) -> Iterator[Any]:
    """(After module_broker_factory: stopped before the module's kafkalite brokers.)"""
    from spark_jobs.session import build_session, stop_session

    try:
        session = build_session(
            "kafkalite-spark-tests",
            # The Kafka sink pools its producers (10 minutes by default); idle ones would keep
            # reconnecting (with WARN lines) to the brokers stopped after each target.
            extra_conf={
                "spark.kafka.producer.cache.timeout": "2s",
                "spark.kafka.producer.cache.evictorThreadRunInterval": "1s",
            },
        )
    except SetupError as exc:
        pytest.skip(f"Spark unavailable: {exc}")
    try:
        yield session
    finally:
        stop_session(session)


@pytest.fixture(scope="module", params=TARGET_PARAMS)
def kafka_target(
    request: pytest.FixtureRequest,
    module_broker_factory: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SparkTarget]:
    if request.param == "kafkalite":
        broker = module_broker_factory()
        yield SparkTarget("kafkalite", broker.bootstrap, (broker,))
        return
    if request.param == "cluster":
        cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
        try:
            yield SparkTarget("cluster", cluster.bootstrap, tuple(cluster.brokers))
        finally:
            cluster.stop()
        return
    with running_target("kafka", tmp_path_factory.mktemp("spark-kafka")) as target:
        yield SparkTarget("kafka", target.bootstrap)


@pytest.fixture(autouse=True)
def broker_log_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    if "kafka_target" not in request.fixturenames:
        yield
        return
    target: SparkTarget = request.getfixturevalue("kafka_target")
    marks = [log_mark(process) for process in target.processes]
    yield
    for process, mark in zip(target.processes, marks, strict=True):
        errors = error_records(lines_since(process, mark))
        assert not errors, "kafkalite logged errors:\n" + "\n".join(errors[:5])


def log_mark(process: BrokerProcess) -> int:
    """Where the broker's log is now: a byte offset in its output file when it has one (it
    keeps only the latest lines in memory then), else a line count."""
    if process.output_file is not None:
        return process.output_file.stat().st_size
    return len(process.lines)


def lines_since(process: BrokerProcess, mark: int) -> list[str]:
    if process.output_file is not None:
        with open(process.output_file, "rb") as output:
            output.seek(mark)
            return output.read().decode(errors="replace").splitlines()
    return process.lines[mark:]


@pytest.fixture
def replicated_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    clusters: list[LocalCluster] = []

    def start(overrides: Mapping[str, str] | None = None) -> LocalCluster:
        clusters.append(start_cluster(tmp_path / f"cluster-{len(clusters)}", overrides))
        return clusters[-1]

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.stop()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.name in EXTENDED:
            item.add_marker(pytest.mark.extended)
