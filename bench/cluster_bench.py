"""The 3-broker benchmark: replication factor 3, kafkalite on ZooKeeper against a 3-node KRaft
Apache Kafka, both on this machine, one after the other.

    python -m bench.cluster_bench [--target both|kafkalite|kafka] [--messages-1k N]
                                  [--messages-100 N] [--out bench/results]

kafkalite runs as `kafkalite cluster --brokers 3` would (kafkalite.cluster.launcher: a real
ZooKeeper and three brokers, every setting at its default but min.insync.replicas=2 and
default.replication.factor=3); Kafka as compat/kafka_cluster.py starts it (combined
broker+controller nodes, the same two settings). Both keep their default session timeouts
(kafkalite: zookeeper.session.timeout.ms 18000; Kafka: broker.session.timeout.ms 9000).

Per cluster, every topic with replication factor 3:
* produce throughput, acks=1 then acks=all: 1 KiB messages to 1 partition, and 100-byte
  messages over 8 partitions (the client's partitioner), as fast as the client goes;
* produce latency p50/p99, the same four cases at a fixed 1000 msg/s for 5 s;
* failover: an idempotent acks=all producer writes every 2 ms to a 1-partition topic, the
  partition leader is SIGKILLed, and the time from the kill to the acknowledgement of the
  first write made after it is recorded (and whether the victim was the controller).

Prints both figures and the ratio kafkalite/Kafka; writes cluster.md and cluster.json under
`--out`. This prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import workloads
from bench.compare import RESULTS_DIR, Row, ratio_table, write_results

SETTINGS = {"min.insync.replicas": "2", "default.replication.factor": "3"}
LATENCY_RATE, LATENCY_SECONDS = 1000.0, 5.0
FAILOVER_WRITE_EVERY_S = 0.002
FAILOVER_WAIT_S = 120.0


def log(message: str) -> None:
    print(f"[cluster-bench] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Workload:
    key: str
    size: int
    partitions: int
    messages: int


@dataclass
class RunningCluster:
    bootstrap: str
    kill: Callable[[int], object]  # SIGKILL of one broker, by id


@contextlib.contextmanager
def kafkalite_cluster(base: Path) -> Iterator[RunningCluster]:
    from kafkalite.cluster.launcher import LocalCluster

    cluster = LocalCluster(base / "kafkalite", 3, SETTINGS).start()
    try:
        yield RunningCluster(cluster.bootstrap, lambda i: cluster.brokers[i - 1].kill())
    finally:
        cluster.stop()


@contextlib.contextmanager
def kafka_cluster(base: Path) -> Iterator[RunningCluster]:
    from compat.kafka_cluster import KafkaCluster

    cluster = KafkaCluster(base / "kafka", 3, SETTINGS).start()
    try:
        yield RunningCluster(cluster.bootstrap, lambda i: cluster.nodes[i - 1].stop(signal.SIGKILL))
    finally:
        cluster.stop()


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Replication factor 3; returns once every partition has a leader and a full ISR."""
    deadline = time.monotonic() + timeout
    for address in bootstrap.split(","):  # each knows all three (CreateTopics may go to any)
        own = AdminClient({"bootstrap.servers": address})
        while len(own.list_topics(timeout=timeout).brokers) < 3:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{address} knows fewer than 3 brokers")
            time.sleep(0.05)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(timeout)
    while True:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 and len(p.isrs) == 3 for p in meta.partitions.values()):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready: {meta and meta.error}")
        time.sleep(0.05)


def measure_workload(
    bootstrap: str, workload: Workload, latency_seconds: float = LATENCY_SECONDS
) -> dict[str, Any]:
    partition = 0 if workload.partitions == 1 else None
    figures: dict[str, Any] = {}
    for acks in ("1", "all"):
        topic = f"bench-{workload.key}-acks-{acks}"
        create_topic(bootstrap, topic, workload.partitions)
        os.sync()
        log(f"{workload.key} acks={acks}: {workload.messages:,} messages")
        result = workloads.produce_throughput(
            bootstrap, topic, workload.messages, workload.size, acks, partition=partition
        )
        latency_topic = f"bench-{workload.key}-latency-acks-{acks}"
        create_topic(bootstrap, latency_topic, workload.partitions)
        latency, rate = workloads.produce_latency(
            bootstrap,
            latency_topic,
            LATENCY_RATE,
            latency_seconds,
            workload.size,
            acks,
            partition=partition,
        )
        figures[acks] = {
            "mb_s": result.mb_per_s,
            "msg_s": result.msg_per_s,
            "latency_fixed_rate": {**latency.summary_ms(), "achieved_msg_s": rate},
            "client_errors": result.client_errors[:5],
        }
        log(f"  {result.mb_per_s:.1f} MB/s, fixed-rate p99 {latency.summary_ms()['p99_ms']:.1f} ms")
    return figures


def measure_failover(cluster: RunningCluster) -> dict[str, Any]:
    topic = "bench-failover"
    create_topic(cluster.bootstrap, topic, 1)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=30)
    leader = metadata.topics[topic].partitions[0].leader
    controller = metadata.controller_id
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": int(FAILOVER_WAIT_S * 1000),
        }
    )
    acked_at: dict[int, float] = {}
    failed: list[int] = []

    def delivered(error: Any, message: Any) -> None:
        number = int(message.value())
        if error is None:
            acked_at[number] = time.monotonic()
        else:
            failed.append(number)

    killed_at: float | None = None
    first_after_kill: int | None = None
    number = 0
    deadline = time.monotonic() + FAILOVER_WAIT_S
    while time.monotonic() < deadline:
        producer.produce(topic, str(number).encode(), partition=0, on_delivery=delivered)
        if killed_at is None and len(acked_at) >= 500:  # a second of steady writes first
            cluster.kill(leader)
            killed_at = time.monotonic()
            first_after_kill = number + 1
        number += 1
        producer.poll(FAILOVER_WRITE_EVERY_S)
        if first_after_kill is not None and first_after_kill in acked_at:
            break
    remaining = producer.flush(FAILOVER_WAIT_S)
    if killed_at is None or first_after_kill not in acked_at:
        raise RuntimeError("no acks=all write was acknowledged after the leader was killed")
    return {
        "failover_s": acked_at[first_after_kill] - killed_at,
        "killed_leader": leader,
        "leader_was_controller": leader == controller,
        "acked": len(acked_at),
        "failed": len(failed),
        "undelivered": remaining,
    }


def run(target: str, base: Path, chosen: list[Workload]) -> dict[str, Any]:
    start = kafkalite_cluster if target == "kafkalite" else kafka_cluster
    log(f"{target}: starting a 3-broker cluster")
    with start(base) as cluster:
        results: dict[str, Any] = {w.key: measure_workload(cluster.bootstrap, w) for w in chosen}
        results["failover"] = measure_failover(cluster)
        log(f"{target}: failover {results['failover']['failover_s']:.2f} s")
    return results


def rows(ours: dict[str, Any], theirs: dict[str, Any], chosen: list[Workload]) -> list[Row]:
    def get(results: dict[str, Any], *path: str) -> float | None:
        value: Any = results
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value

    table = []
    for w in chosen:
        for acks in ("1", "all"):
            name = f"{w.key} acks={acks}"
            table.append(
                Row(
                    name,
                    "MB/s",
                    get(ours, w.key, acks, "mb_s"),
                    get(theirs, w.key, acks, "mb_s"),
                    True,
                )
            )
            for pct in ("p50", "p99"):
                path = (w.key, acks, "latency_fixed_rate", f"{pct}_ms")
                table.append(
                    Row(f"{name} latency {pct}", "ms", get(ours, *path), get(theirs, *path), False)
                )
    failover = ("failover", "failover_s")
    table.append(
        Row(
            "failover after SIGKILL of a leader",
            "s",
            get(ours, *failover),
            get(theirs, *failover),
            False,
        )
    )
    return table


def markdown(table: list[Row], chosen: list[Workload], results: dict[str, Any]) -> str:
    sizes = ", ".join(f"{w.key}: {w.messages:,} messages" for w in chosen)
    lines = [
        f"3 brokers, replication factor 3, min.insync.replicas=2, same machine, one run each "
        f"({sizes})",
        "",
        *ratio_table(table),
    ]
    for target, figures in results.items():
        failover = figures.get("failover", {})
        if failover:
            role = "the controller" if failover["leader_was_controller"] else "not the controller"
            lines.append(f"\n{target}: killed leader {failover['killed_leader']} ({role})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster_bench", description=__doc__)
    parser.add_argument("--target", choices=("both", "kafkalite", "kafka"), default="both")
    parser.add_argument("--messages-1k", type=int, default=200_000)
    parser.add_argument("--messages-100", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    chosen = [
        Workload("1KiB-1p", 1024, 1, args.messages_1k),
        Workload("100B-8p", 100, 8, args.messages_100),
    ]
    targets = ["kafkalite", "kafka"] if args.target == "both" else [args.target]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-cluster-bench-") as tmp:
        for target in targets:
            results[target] = run(target, Path(tmp), chosen)
    table = rows(results.get("kafkalite", {}), results.get("kafka", {}), chosen)
    text = markdown(table, chosen, results)
    print(text)
    stem = write_results(args.out, f"cluster-{args.target}", text, results)
    log(f"written {stem}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
