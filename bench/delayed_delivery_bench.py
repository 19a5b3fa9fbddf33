"""Delayed delivery: how fast records are held and released, how late they become readable,
and the broker's RSS while they are held (issue 17).

    python -m bench.delayed_delivery_bench [--records 30000] [--spread-ms 3000]
        [--lead-ms 15000] [--partitions 4] [--size 100]

A kafkalite broker is started in a temporary directory (kafkalite.testing.BrokerProcess).
Every record carries `kafkalite-deliver-at` (an absolute due time, so the consumer knows it),
spread evenly over `--spread-ms` starting `--lead-ms` after the run begins (the produce phase
must end before: the run says so if it did not). Figures: produce rate
(records held per second, acks=1, until flush() ends), broker RSS once all are held, release
rate (records per second while the releases run) and lateness (consumer arrival minus due
time, so it includes the fetch: p50/p99/max), and the broker's own (release minus due time,
from its lateness histogram: the bucket bounds). It prints figures, it is not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.procstat import free_port, status_kib
from kafkalite.testing import BrokerProcess


def _percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(int(len(sorted_values) * fraction), len(sorted_values) - 1)]


def run(records: int, spread_ms: int, lead_ms: int, partitions: int, size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kafkalite-delay-bench-") as data:
        port = free_port()
        overrides = {"num.partitions": str(partitions), "kafkalite.metrics.port": str(port)}
        with BrokerProcess(Path(data), overrides) as broker:
            figures = _measure(broker, records, spread_ms, lead_ms, partitions, size)
            return {**figures, **_broker_lateness(port)}


def _broker_lateness(port: int) -> dict[str, float]:
    """The broker's own lateness histogram (release time minus due time): the upper bound
    of the bucket holding the median and the 99th percentile."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    buckets = [
        (float(line.split('le="')[1].split('"')[0]), float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("kafkalite_delayeddelivery_latenessms_bucket")
    ]
    total = buckets[-1][1] or 1

    def upper(fraction: float) -> float:
        return next(bound for bound, count in buckets if count >= fraction * total)

    return {"broker lateness p50 <= ms": upper(0.5), "broker lateness p99 <= ms": upper(0.99)}


def _measure(
    broker: BrokerProcess, records: int, spread_ms: int, lead_ms: int, partitions: int, size: int
) -> dict[str, float]:
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("delayed", partitions, 1, config={"kafkalite.delayed.delivery.enable": "true"})
    admin.create_topics([topic])["delayed"].result(30)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "fetch.wait.max.ms": 10}
    )
    consumer.assign([TopicPartition("delayed", p, 0) for p in range(partitions)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    first_due = int(time.time() * 1000) + lead_ms
    value = b"x" * size
    started = time.monotonic()
    for i in range(records):
        due = first_due + i * spread_ms // records
        while True:
            try:
                producer.produce(
                    "delayed",
                    value,
                    partition=i % partitions,
                    headers=[("kafkalite-deliver-at", b"%d" % due)],
                )
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produce_s = time.monotonic() - started
    if time.time() * 1000 > first_due:
        print("warning: the first records were due before the produce phase ended (--lead-ms)")
    held_rss_kib = (status_kib(broker.process.pid, "VmRSS") if broker.process else None) or 0
    lateness: list[float] = []
    first_at = last_at = 0.0
    deadline = time.monotonic() + spread_ms / 1000 + records / 1000 + 60
    while len(lateness) < records and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.1):
            if message.error():
                continue
            now = time.time() * 1000
            due = int(dict(message.headers())["kafkalite-deliver-at"])
            lateness.append(now - due)
            first_at = first_at or now
            last_at = now
    consumer.close()
    lateness.sort()
    return {
        "records": records,
        "held per s": records / produce_s,
        "RSS held (MiB)": held_rss_kib / 1024,
        "released per s": len(lateness) / max((last_at - first_at) / 1000, 1e-3),
        "consumed": len(lateness),
        "lateness p50 ms": _percentile(lateness, 0.5),
        "lateness p99 ms": _percentile(lateness, 0.99),
        "lateness max ms": lateness[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--spread-ms", type=int, default=3_000)
    parser.add_argument("--lead-ms", type=int, default=15_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    for name, figure in run(
        args.records, args.spread_ms, args.lead_ms, args.partitions, args.size
    ).items():
        print(f"{name:>18}: {figure:,.1f}")


if __name__ == "__main__":
    main()
