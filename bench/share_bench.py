"""Share group consumption (KIP-932), the issue's benchmark: 1, 4 and 8 confluent-kafka
ShareConsumers on ONE partition and on 8 partitions, records/s and acknowledgement latency
p50/p99, kafkalite and Apache Kafka 4.4 (compat/kafka_server.py, KRaft, one node) in the same
run, one after the other.

    .venv/bin/python -m bench.share_bench [--messages 20000] [--size 100] [--consumers 1,4,8]
        [--partitions 1,8] [--repeat 3] [--target both|kafkalite|kafka] [--bootstrap HOST:PORT]

Each case uses a new topic and share group: the topic is filled first (`--messages` records
of `--size` B, spread round-robin over its partitions), the group's `share.auto.offset.reset`
is set to `earliest`, then the consumers (one thread each) poll in explicit acknowledgement
mode, ACCEPT every record and commit each poll's acknowledgements with `commit_sync`. Both
brokers run side by side and each case runs on one, then the other.

- records/s: the records, over the time from the first delivery to the last (joining the group
  is not counted);
- acknowledgement latency: per record, from the return of the poll that delivered it to the
  return of the `commit_sync` that answered its ACCEPT as successful (a commit round-trip plus
  the few microseconds the consumer takes to acknowledge the batch); p50 and p99 over records.

Each case runs `--repeat` times; the table shows the medians of each figure. It prints a
Markdown table; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kafkalite.testing import BrokerProcess

CASE_TIMEOUT_S = 180.0


@dataclass
class Member:
    """What one consumer thread saw."""

    delivered: int = 0
    offsets: set[tuple[int, int]] = field(default_factory=set)
    duplicates: int = 0
    first: float = 0.0
    last: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, per record
    failed_acks: int = 0


@dataclass
class Result:
    broker: str
    partitions: int
    consumers: int
    records: int
    seconds: float
    p50_ms: float
    p99_ms: float
    duplicates: int
    split: list[int]

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def fill(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1", "batch.size": 16384}
    )  # Java's default: ~140 records a batch
    payload = b"x" * size
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120) != 0:
        raise RuntimeError("the topic could not be filled")


def prepare(bootstrap: str, partitions: int, messages: int, size: int) -> tuple[str, str]:
    topic, group = f"share-bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    fill(bootstrap, topic, partitions, messages, size)
    return topic, group


def consume(bootstrap: str, topic: str, group: str, member: Member, total: list[int],
            messages: int, stop: threading.Event) -> None:  # fmt: skip
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})  # fmt: skip
    consumer.subscribe([topic])
    try:
        while not stop.is_set() and total[0] < messages:
            batch = [m for m in consumer.poll(0.2) if m.error() is None]
            if not batch:
                continue
            polled = time.perf_counter()
            member.first = member.first or polled
            for message in batch:
                consumer.acknowledge(message)
                place = (message.partition(), message.offset())
                if place in member.offsets:
                    member.duplicates += 1
                member.offsets.add(place)
            answers = consumer.commit_sync(30.0)
            answered = time.perf_counter()
            failed = {tp.partition for tp, error in answers.items() if error is not None}
            for message in batch:
                if message.partition() in failed:
                    member.failed_acks += 1
                else:
                    member.latencies.append(answered - polled)
            member.delivered += len(batch)
            member.last = answered
            total[0] += len(batch)
    finally:
        consumer.close()


def run_case(bootstrap: str, broker: str, partitions: int, consumers: int,
             messages: int, size: int) -> Result:  # fmt: skip
    topic, group = prepare(bootstrap, partitions, messages, size)
    members = [Member() for _ in range(consumers)]
    total, stop = [0], threading.Event()
    threads = [
        threading.Thread(target=consume, args=(bootstrap, topic, group, m, total, messages, stop))
        for m in members
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + CASE_TIMEOUT_S
    while total[0] < messages and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join()
    seen = [place for m in members for place in m.offsets]
    latencies = sorted(x for m in members for x in m.latencies)
    started = min((m.first for m in members if m.first), default=0.0)
    ended = max((m.last for m in members), default=0.0)
    duplicates = sum(m.duplicates for m in members) + len(seen) - len(set(seen))
    return Result(
        broker, partitions, consumers, total[0], ended - started,
        _percentile(latencies, 50) * 1000, _percentile(latencies, 99) * 1000,
        duplicates, [m.delivered for m in members],
    )  # fmt: skip


def _percentile(values: list[float], pct: int) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def run_all(brokers: dict[str, str], args: argparse.Namespace) -> list[Result]:
    """Every case `--repeat` times, each case on every broker in turn (the brokers run side by
    side and alternate, so a busy moment of the shared machine falls on both); `table` shows
    each figure's median."""
    results = []
    for _ in range(args.repeat):
        for partitions in args.partitions:
            for consumers in args.consumers:
                for broker, bootstrap in brokers.items():
                    results.append(run_logged(bootstrap, broker, partitions, consumers, args))
    return results


def run_logged(bootstrap: str, broker: str, partitions: int, consumers: int,
               args: argparse.Namespace) -> Result:  # fmt: skip
    result = run_case(bootstrap, broker, partitions, consumers, args.messages, args.size)
    print(f"[share_bench] {broker}: {partitions} partition(s), {consumers} consumer(s): "
          f"{result.records_s:,.0f} records/s, ack p50 {result.p50_ms:.1f} ms, p99 "
          f"{result.p99_ms:.1f} ms, split {result.split}, {result.duplicates} twice",
          file=sys.stderr, flush=True)  # fmt: skip
    return result


def table(results: list[Result], messages: int) -> str:
    by: dict[tuple[str, int, int], list[Result]] = {}
    for r in results:
        by.setdefault((r.broker, r.partitions, r.consumers), []).append(r)
    brokers = list(dict.fromkeys(r.broker for r in results))
    cases = sorted({(r.partitions, r.consumers) for r in results})
    head = ["partitions", "consumers"]
    for broker in brokers:
        head += [f"{broker} records/s", f"{broker} ack p50 / p99 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for partitions, consumers in cases:
        cells = [str(partitions), str(consumers)]
        for broker in brokers:
            runs = by.get((broker, partitions, consumers), [])
            if not runs:
                cells += ["-", "-"]
                continue
            short = sum(r.records < messages for r in runs)
            rate = statistics.median(r.records_s for r in runs)
            p50 = statistics.median(r.p50_ms for r in runs)
            p99 = statistics.median(r.p99_ms for r in runs)
            note = f" ({short} run(s) short)" if short else ""
            cells += [f"{rate:,.0f}{note}", f"{p50:.1f} / {p99:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--consumers", default="1,4,8")
    parser.add_argument("--partitions", default="1,8")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians shown")
    parser.add_argument("--target", choices=("both", "kafkalite", "kafka"), default="both")
    parser.add_argument("--bootstrap", help="measure this broker instead")
    args = parser.parse_args(argv)
    args.consumers = [int(c) for c in args.consumers.split(",")]
    args.partitions = [int(p) for p in args.partitions.split(",")]
    if args.bootstrap:
        print(table(run_all({"broker": args.bootstrap}, args), args.messages))
        return 0
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as stack:
        brokers = {}
        if args.target in ("both", "kafkalite"):
            broker = BrokerProcess(Path(data) / "kafkalite").start()
            stack.callback(broker.stop)
            brokers["kafkalite"] = broker.bootstrap
        if args.target in ("both", "kafka"):
            from compat.kafka_server import KafkaServer

            server = KafkaServer(Path(data) / "kafka").start()
            stack.callback(server.stop)
            brokers["kafka"] = server.bootstrap
        results = run_all(brokers, args)
    print(table(results, args.messages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
