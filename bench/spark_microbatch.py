"""One Spark Structured Streaming micro-batch of 100k events on kafkalite, timed.

    python -m bench.spark_microbatch [--events 100000] [--partitions 2] [--rounds 2]
                                     [--bootstrap HOST:PORT] [--json out.json]

Starts a kafkalite broker in a temporary directory (or uses --bootstrap), produces
--events page-view events with spark_jobs.generator (as fast as it goes), starts a local
SparkSession (spark_jobs.session: local[2], 4 shuffle partitions) and runs the page-counts
pipeline (spark_jobs.page_counts: Kafka source -> JSON -> 1-minute windows per page with a
watermark -> Kafka sink, update mode) once with trigger(availableNow=True) and
maxOffsetsPerTrigger = 2 x --events, so all events are one micro-batch (a limit equal to the
backlog can leave a record over: Spark prorates it over the partitions, rounding down).
Further rounds produce another --events events and run again on the same checkpoint (warm
JVM, state restored).

Printed, separately:
- startup: SparkSession creation (JVM launch, SparkContext; the connector jars are cached),
- per round: the micro-batch (Spark's triggerExecution for the batch: offsets, planning,
  reading from Kafka, aggregating, writing to Kafka, state and offset commits) with Spark's
  breakdown, the whole availableNow query (start, the batch, the trailing no-data batch
  that moves the watermark, stop), and the broker's CPU seconds meanwhile.
This prints figures, it is not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.procstat import cpu_seconds
from kafkalite.testing import BrokerProcess
from spark_jobs.generator import generate
from spark_jobs.kafka_util import ensure_topic
from spark_jobs.page_counts import run_once
from spark_jobs.session import build_session, stop_session

START = 1_735_725_600_000  # 2025-01-01T10:00:00Z


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_microbatch")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bootstrap", help="an already running broker (default: kafkalite)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="spark-microbatch-") as work:
        broker = None
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker = BrokerProcess(Path(work) / "data").start()
            bootstrap = broker.bootstrap
            log(f"kafkalite at {bootstrap} (pid {broker.process.pid})")
        broker_pid = broker.process.pid if broker and broker.process else None
        try:
            results = run(args, bootstrap, Path(work), broker_pid)
        finally:
            if broker is not None:
                broker.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def run(args: argparse.Namespace, bootstrap: str, work: Path, broker_pid: int | None) -> dict:
    suffix = uuid.uuid4().hex[:8]
    events_topic, counts_topic = f"bench-events-{suffix}", f"bench-counts-{suffix}"
    ensure_topic(bootstrap, counts_topic, partitions=1)
    checkpoint = str(work / "checkpoint")

    began = time.perf_counter()
    spark = build_session("spark-microbatch-bench")
    startup = time.perf_counter() - began
    print(f"startup (JVM + SparkContext, jars cached): {startup:.2f} s")
    results: dict = {"events_per_batch": args.events, "startup_s": round(startup, 3), "rounds": []}
    try:
        for round_no in range(1, args.rounds + 1):
            produce_began = time.perf_counter()
            generate(
                bootstrap,
                events_topic,
                args.events,
                seed=round_no,
                start_ts=START + (round_no - 1) * args.events * 10,
                spacing_ms=10,  # 100k events = 1000 s of event time, 17 windows
                partitions=args.partitions,
            )
            produce_s = time.perf_counter() - produce_began
            cpu0 = cpu_seconds(broker_pid) if broker_pid else None
            summary = run_once(
                spark,
                bootstrap,
                checkpoint,
                events_topic=events_topic,
                output_topic=counts_topic,
                max_offsets_per_trigger=2 * args.events,  # >= the backlog: one batch
            )
            cpu1 = cpu_seconds(broker_pid) if broker_pid else None
            data = [p for p in summary.progress if p.get("numInputRows")]
            if len(data) != 1 or data[0]["numInputRows"] != args.events:
                raise RuntimeError(f"expected one batch of {args.events}: {summary}")
            batch = data[0]
            durations = batch["durationMs"]
            batch_s = durations["triggerExecution"] / 1000
            broker_cpu = None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 2)
            figures = {
                "round": round_no,
                "produce_s": round(produce_s, 3),
                "batch_s": batch_s,
                "events_per_s": round(args.events / batch_s),
                "query_s": round(summary.seconds, 3),
                "batch_breakdown_ms": durations,
                "window_updates_written": summary.output_rows,
                "broker_cpu_s": broker_cpu,
            }
            results["rounds"].append(figures)
            label = "cold (first query in the JVM)" if round_no == 1 else "warm"
            breakdown = ", ".join(
                f"{k} {v}"
                for k, v in sorted(durations.items(), key=lambda kv: -kv[1])
                if k != "triggerExecution"
            )
            print(
                f"round {round_no} [{label}]: micro-batch of {args.events:,} events "
                f"{batch_s:.2f} s ({args.events / batch_s:,.0f} events/s); whole availableNow "
                f"query {summary.seconds:.2f} s; broker CPU "
                f"{'-' if broker_cpu is None else f'{broker_cpu:.2f} s'}; produce "
                f"{produce_s:.2f} s\n    Spark's breakdown (ms): {breakdown}"
            )
    finally:
        stop_session(spark)
    return results


if __name__ == "__main__":
    sys.exit(main())
