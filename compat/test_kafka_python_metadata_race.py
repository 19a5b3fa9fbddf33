"""The kafka-python lead of compat/FINDINGS.md (test_idempotent_producer_max_in_flight[1]: a
group-less consumer read nothing in 30 s, once in about ten suite runs) is the client's.

compat/kafka_python/metadata_race.py holds the consumer's first Metadata answer in a proxy
until subscribe() was called: kafka-python then never asks for the topic's metadata (its
ClusterMetadata lets the answer to the request in flight clear the update that subscribe()
asked for), assigns itself nothing and reads nothing - on Apache Kafka exactly as on
kafkalite. Subscribing before that first request reads everything on both. In the suite the
race is the fixture's consumer thread sending its first Metadata request before the test
calls subscribe(), which only a loaded machine lets happen.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from compat.kafka_dist import CompatSetupError
from compat.kafka_python import run
from compat.scenario_helpers import (
    create_topic,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
)

RACE = Path(__file__).resolve().with_name("kafka_python") / "metadata_race.py"
COUNT = 20


@pytest.fixture(scope="module")
def kafka_python() -> Path:
    try:
        return run.ensure_setup()
    except CompatSetupError as exc:
        pytest.fail(f"kafka-python: {exc}", pytrace=False)


def _consume(python: Path, bootstrap: str, topic: str, mode: str) -> dict:
    done = subprocess.run(
        [str(python), str(RACE), bootstrap, topic, mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("mode", "read"), [("first", COUNT), ("in-flight", 0)], ids=["subscribe-first", "in-flight"]
)
def test_group_less_consumer_subscribing_during_a_metadata_request(
    target, topic_name: Callable[..., str], kafka_python: Path, mode: str, read: int
) -> None:
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    prod = producer(target.bootstrap)
    try:
        produce_all(prod, topic, ({"value": b"m%d" % i} for i in range(COUNT)))
    finally:
        prod.close()
    outcome = _consume(kafka_python, target.bootstrap, topic, mode)
    assert (outcome["read"], outcome["assignment"]) == ((read, [[topic, 0]]) if read else (0, []))
