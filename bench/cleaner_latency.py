"""Produce latency while the log cleaner compacts a large topic (issue 9, point 9).

    .venv/bin/python -m bench.cleaner_latency [--fill-mb 200] [--keys 20000] [--rate 500]
        [--idle-seconds 5] [--json out.json]

Starts a broker in a temporary directory, fills a compacted topic (16 MiB segments, every
key written many times) with cleaning held back by min.compaction.lag.ms, measures produce
latency on another topic at a fixed rate (acks=1, linger.ms=0) while nothing else runs,
then lifts the lag (IncrementalAlterConfigs) and measures again until the broker logs that
the cleaner is done. Prints both windows' p50/p99/max and how long cleaning took. It prints
figures, it is not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from bench.workloads import Latencies, payload, producer_config
from kafkalite.testing import BrokerProcess

MIB = 1 << 20
SEGMENT_BYTES = 16 * MIB
HOLD_BACK_MS = str(365 * 24 * 3600 * 1000)
CLEANED_LINE = "log cleaner reclaimed"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _create_topics(bootstrap: str, compacted: str, probe: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": str(SEGMENT_BYTES),
        "min.compaction.lag.ms": HOLD_BACK_MS,
    }
    futures = admin.create_topics([NewTopic(compacted, 1, 1, config=config), NewTopic(probe, 1, 1)])
    for future in futures.values():
        future.result(30)


def _fill(bootstrap: str, topic: str, megabytes: int, keys: int, size: int) -> float:
    producer = Producer(producer_config(bootstrap, "1", 5))
    value = payload(size)
    count = megabytes * MIB // size
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, key=b"key-%d" % (i % keys), partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("fill did not complete")
    return time.perf_counter() - start


def _lift_hold_back(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _timed_produce(
    bootstrap: str, topic: str, rate: float, until: Any, max_seconds: float
) -> tuple[Latencies, float]:
    """Produce at `rate` until `until()` is true (or max_seconds); returns latencies, seconds."""
    producer = Producer(producer_config(bootstrap, "1", 0))
    value = payload(100)
    latencies = Latencies()
    interval = 1.0 / rate
    start = time.perf_counter()
    i = 0
    while not until() and time.perf_counter() - start < max_seconds:
        due = start + i * interval
        while (wait := due - time.perf_counter()) > 0:
            producer.poll(wait)
        producer.produce(topic, value, partition=0, on_delivery=latencies.on_delivery)
        producer.poll(0)
        i += 1
    elapsed = time.perf_counter() - start
    producer.flush(60)
    return latencies, elapsed


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cleaner-bench-") as tmp:
        broker = BrokerProcess(Path(tmp), {"log.cleaner.backoff.ms": "200"})
        broker.start()
        try:
            _create_topics(broker.bootstrap, "compacted", "probe")
            fill_s = _fill(broker.bootstrap, "compacted", args.fill_mb, args.keys, 1024)
            _log(f"filled {args.fill_mb} MiB in {fill_s:.1f} s")
            idle, _ = _timed_produce(
                broker.bootstrap, "probe", args.rate, lambda: False, args.idle_seconds
            )
            seen = len(broker.lines)
            _lift_hold_back(broker.bootstrap, "compacted")

            def cleaned() -> bool:
                return any(CLEANED_LINE in line for line in broker.lines[seen:])

            cleaning, seconds = _timed_produce(
                broker.bootstrap, "probe", args.rate, cleaned, args.max_seconds
            )
            if not cleaned():
                raise RuntimeError(f"the cleaner did not finish within {args.max_seconds} s")
            done = next(line for line in broker.lines[seen:] if CLEANED_LINE in line)
            _log(done.strip())
        finally:
            broker.stop()
    return {
        "fill_mb": args.fill_mb,
        "keys": args.keys,
        "rate": args.rate,
        "idle": idle.summary_ms(),
        "cleaning": {**cleaning.summary_ms(), "seconds": seconds},
    }


def format_table(result: dict[str, Any]) -> str:
    rows = ["| window | samples | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for name in ("idle", "cleaning"):
        figures = result[name]
        rows.append(
            f"| {name} | {figures['samples']} | {figures['p50_ms']:.2f} | "
            f"{figures['p99_ms']:.2f} | {figures['max_ms']:.2f} |"
        )
    rows.append(
        f"\ncleaning {result['fill_mb']} MiB ({result['keys']} keys) took "
        f"{result['cleaning']['seconds']:.1f} s; produce at {result['rate']} msg/s, acks=1"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fill-mb", type=int, default=200)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--idle-seconds", type=float, default=5)
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args)
    print(format_table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
