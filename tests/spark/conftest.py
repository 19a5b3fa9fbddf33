"""Fixtures of the Spark suites: one SparkSession per module, brokers to run the jobs against.

- `spark`: a local SparkSession with the Kafka connector (spark_jobs.session), one per test
  module (JVM startup takes seconds), stopped with its JVM at module end. Without Java >= 17
  (or, before the connector jars are cached, Maven) the tests are skipped with that reason.
- `kafka_target`: a `SparkTarget` (name, bootstrap, process): a kafkalite broker (through
  tests/conftest.py's module_broker_factory) and a real Apache Kafka broker (compat/targets.py;
  its tests marked `kafka`); one broker per module and target. Tests keep apart through
  their own topics.
- `broker_log_clean` (autouse): on kafkalite, the test fails if the broker logged an ERROR
  or a traceback meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from compat.targets import running_target
from kafkalite.testing import error_records
from spark_jobs.jars import SetupError

TARGET_PARAMS = [
    pytest.param("kafkalite", id="kafkalite"),
    pytest.param("kafka", id="kafka", marks=pytest.mark.kafka),
]


@dataclass(frozen=True)
class SparkTarget:
    name: str
    bootstrap: str
    process: Any = None  # kafkalite.testing.BrokerProcess for kafkalite


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
        yield SparkTarget("kafkalite", broker.bootstrap, broker)
        return
    with running_target("kafka", tmp_path_factory.mktemp("spark-kafka")) as target:
        yield SparkTarget("kafka", target.bootstrap)


@pytest.fixture(autouse=True)
def broker_log_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    if "kafka_target" not in request.fixturenames:
        yield
        return
    target: SparkTarget = request.getfixturevalue("kafka_target")
    process = target.process
    mark = len(process.lines) if process is not None else 0
    yield
    if process is not None:
        errors = error_records(process.lines[mark:])
        assert not errors, "kafkalite logged errors:\n" + "\n".join(errors[:5])
