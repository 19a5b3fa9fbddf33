"""CreateTopics of 1, 100 and 1,000 partitions: kafkalite and (optionally) Apache Kafka.

    .venv/bin/python -m bench.create_topics [--partitions 1,100,1000] [--runs 3] [--kafka]

Prints figures, it is not a test. Each broker runs on an empty data dir with its defaults
(replication factor 1); for each size a fresh topic is created with confluent-kafka's
AdminClient and two times are taken from the request: the CreateTopics answer, and the first
Metadata answer showing every partition with a leader (when a client can use the topic).
With `--kafka` the same runs against Apache Kafka (compat/kafka_server.py, KRaft, one node).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

DEADLINE_S = 300.0


def create_once(admin: AdminClient, partitions: int) -> tuple[float, float]:
    """(seconds to the CreateTopics answer, seconds until every partition has a leader)."""
    name = f"bench-{partitions}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1)], operation_timeout=DEADLINE_S, request_timeout=DEADLINE_S
    )
    futures[name].result(timeout=DEADLINE_S)
    answered = time.perf_counter() - started
    while time.perf_counter() - started < DEADLINE_S:
        topic = admin.list_topics(name, timeout=DEADLINE_S).topics.get(name)
        if (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return answered, time.perf_counter() - started
        time.sleep(0.01)
    raise TimeoutError(f"{name}: partitions without a leader after {DEADLINE_S}s")


def measure(bootstrap: str, sizes: list[int], runs: int) -> dict[int, tuple[float, float]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    results = {}
    for size in sizes:
        times = [create_once(admin, size) for _ in range(runs)]
        results[size] = (
            statistics.median(t[0] for t in times),
            statistics.median(t[1] for t in times),
        )
        print(f"[bench] {bootstrap}: {size} partitions {results[size]}", file=sys.stderr)
    return results


def run_kafkalite(tmp: Path, sizes: list[int], runs: int) -> dict[int, tuple[float, float]]:
    with BrokerProcess(tmp / "kafkalite") as broker:
        return measure(broker.bootstrap, sizes, runs)


def run_kafka(tmp: Path, sizes: list[int], runs: int) -> dict[int, tuple[float, float]]:
    from compat.kafka_server import KafkaServer

    server: Any = KafkaServer(tmp / "kafka").start()
    try:
        return measure(server.bootstrap, sizes, runs)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,100,1000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kafka", action="store_true", help="also Apache Kafka")
    args = parser.parse_args()
    sizes = [int(size) for size in args.partitions.split(",")]
    with tempfile.TemporaryDirectory(prefix="create-topics-") as name:
        tmp = Path(name)
        results = {"kafkalite": run_kafkalite(tmp, sizes, args.runs)}
        if args.kafka:
            results["Apache Kafka"] = run_kafka(tmp, sizes, args.runs)
    print(f"median of {args.runs} runs, seconds: CreateTopics answer / all partitions led")
    print(f"{'partitions':>10}  " + "  ".join(f"{target:>22}" for target in results))
    for size in sizes:
        cells = [f"{r[size][0]:9.3f} / {r[size][1]:9.3f}" for r in results.values()]
        print(f"{size:>10}  " + "  ".join(f"{cell:>22}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
