"""Delayed delivery's memory bound: the broker's RSS with a million held records, and how late
records due meanwhile are released (issue 17 point 4, the on-disk due-time index).

    python -m bench.delayed_memory_bench [--records 1000000] [--hours 6] [--probes 5000]
        [--partitions 4] [--size 100] [--restart [--settle-s 45]]

A kafkalite broker is started in a temporary directory (kafkalite.testing.BrokerProcess) and
a topic opted in to delayed delivery is created. `--records` records are produced with
confluent-kafka, each with `kafkalite-deliver-at` spread evenly over `--hours` starting an
hour ahead (so all stay held). Then `--probes` records due over the next 5 s are produced and
consumed: their lateness (arrival minus due time, fetch included) is measured with the
million held. Printed: broker RSS before producing, once all are held (and its peak), the
probes' lateness p50/p99/max, and with `--restart`, `--settle-s` later (the index is
checkpointed every 30 s), the time a restart after kill -9 takes (the index recovered from
its last checkpoint on: the store offsets read again are counted from the broker's log) and
the RSS after it, then the same for a clean restart (stop and start). To compare
with older code, put its checkout first on PYTHONPATH (the broker subprocess inherits it):
`PYTHONPATH=/path/to/old/checkout python bench/delayed_memory_bench.py`.
It prints figures, it is not a test.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.append(str(Path(__file__).resolve().parent.parent))  # (run as a file too)

from bench.procstat import free_port, status_kib  # noqa: E402
from kafkalite.testing import BrokerProcess  # noqa: E402

TOPIC = "held"
HOUR_MS = 3_600_000


def _rss_mib(broker: BrokerProcess, field: str = "VmRSS") -> float:
    pid = broker.process.pid if broker.process else None
    return (status_kib(pid, field) or 0) / 1024 if pid else 0.0


def _produce(producer: Producer, partitions: int, dues: range | list[int], value: bytes) -> None:
    for i, due in enumerate(dues):
        while True:
            try:
                producer.produce(
                    TOPIC,
                    value,
                    partition=i % partitions,
                    headers=[("kafkalite-deliver-at", b"%d" % due)],
                )
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(600)


def _held(broker: BrokerProcess) -> int:
    """Held records, from `kafkalite topic describe`'s source: the metrics endpoint."""
    import urllib.request

    assert broker.metrics_url is not None
    text = urllib.request.urlopen(broker.metrics_url, timeout=30).read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("kafkalite_delayeddelivery_heldrecords{")
    )


def _read_again(lines: list[str]) -> int:
    """Store offsets the delay stores read again on open (from their log lines)."""
    pattern = re.compile(r"store offsets (\d+) to (\d+) read again")
    return sum(int(m[2]) - int(m[1]) for line in lines if (m := pattern.search(line)))


def _lateness(bootstrap: str, partitions: int, probes: int, timeout_s: float) -> list[float]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "fetch.wait.max.ms": 10}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    lateness: list[float] = []
    deadline = time.monotonic() + timeout_s
    while len(lateness) < probes and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.1):
            if message.error():
                continue
            due = int(dict(message.headers())["kafkalite-deliver-at"])
            lateness.append(time.time() * 1000 - due)
    consumer.close()
    return sorted(lateness)


def run(args: argparse.Namespace) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-delay-memory-") as data:
        overrides = {"kafkalite.metrics.port": str(free_port())}
        with BrokerProcess(Path(data), overrides) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            topic = NewTopic(
                TOPIC, args.partitions, 1, config={"kafkalite.delayed.delivery.enable": "true"}
            )
            admin.create_topics([topic])[TOPIC].result(30)
            figures["RSS before (MiB)"] = _rss_mib(broker)
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "linger.ms": 20,
                    "acks": 1,
                    "batch.num.messages": 10_000,
                    "queue.buffering.max.messages": 1_000_000,
                }
            )
            value = b"x" * args.size
            start = int(time.time() * 1000) + HOUR_MS
            spread = int(args.hours * HOUR_MS)
            started = time.monotonic()
            _produce(
                producer,
                args.partitions,
                [start + i * spread // args.records for i in range(args.records)],
                value,
            )
            figures["held per s"] = args.records / (time.monotonic() - started)
            figures["held"] = _held(broker)
            figures["RSS held (MiB)"] = _rss_mib(broker)
            figures["RSS peak (MiB)"] = _rss_mib(broker, "VmHWM")
            first = int(time.time() * 1000) + 2_000
            _produce(
                producer,
                args.partitions,
                [first + i * 5_000 // args.probes for i in range(args.probes)],
                value,
            )
            lateness = _lateness(broker.bootstrap, args.partitions, args.probes, 60)
            figures["probes released"] = len(lateness)
            if lateness:
                figures["lateness p50 ms"] = lateness[len(lateness) // 2]
                figures["lateness p99 ms"] = lateness[
                    min(len(lateness) * 99 // 100, len(lateness) - 1)
                ]
                figures["lateness max ms"] = lateness[-1]
            figures["RSS after probes (MiB)"] = _rss_mib(broker)
            if args.restart:
                time.sleep(args.settle_s)  # a checkpoint of the index covers the held
                broker.kill()  # kill -9: the index is recovered from its last checkpoint on
                began = time.monotonic()
                broker.lines.clear()
                broker.start(timeout=600)
                figures["restart after kill -9 s"] = time.monotonic() - began
                figures["store offsets read again"] = _read_again(broker.lines)
                figures["held after kill -9"] = _held(broker)
                figures["RSS after kill -9 restart (MiB)"] = _rss_mib(broker)
                figures["RSS peak after kill -9 (MiB)"] = _rss_mib(broker, "VmHWM")
                began = time.monotonic()
                broker.restart(timeout=600)
                figures["clean restart s"] = time.monotonic() - began
                figures["held after restart"] = _held(broker)
                figures["RSS after restart (MiB)"] = _rss_mib(broker)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--probes", type=int, default=5_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--restart", action="store_true")
    parser.add_argument("--settle-s", type=float, default=45.0, help="before the kill -9")
    for name, figure in run(parser.parse_args()).items():
        print(f"{name:>24}: {figure:,.1f}")


if __name__ == "__main__":
    main()
