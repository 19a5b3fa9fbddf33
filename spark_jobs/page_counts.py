"""Streaming pipeline: page views per page per event-time window, from Kafka to Kafka.

    python -m spark_jobs.page_counts --bootstrap HOST:PORT --checkpoint DIR [--once]
        [--events-topic events] [--output-topic page-counts] [--max-offsets-per-trigger N]
        [--starting-offsets earliest] [--window "1 minute"] [--watermark "10 minutes"]
        [--output-mode update|append] [--trigger-interval "5 seconds"]
        [--master URL] [--conf KEY=VALUE ...] [--log-level LEVEL]

Input: topic `events`, JSON values {"user_id", "page", "ts"} with ts in epoch millis
(spark_jobs/events.py), read with readStream.format("kafka") (subscribe, startingOffsets,
maxOffsetsPerTrigger). Values that are not such JSON are dropped.

Aggregation: tumbling event-time windows (default 1 minute) per page, with a watermark
(default 10 minutes): the state of a window is dropped once the watermark (the largest
event time seen, minus the delay) passes its end, and events older than the watermark are
dropped too. Only events later than that are lost, so choose the delay above the
lateness of the stream.

Output: topic `page-counts`, key = page, value =
{"window_start": "2025-01-01T10:00:00Z", "window_end": "2025-01-01T10:01:00Z",
 "page": "/cart", "count": 17}, written with writeStream.format("kafka") (the Java producer
with its defaults: acks=all, idempotence on), progress kept in the checkpoint directory.

Output mode: **update** by default. Every micro-batch emits the new running count of each
window that changed in it, so a window appears as soon as it has data and again whenever it
grows; the current count of a (window_start, page) is the *last* record for it in the topic
(records of one page share a key, hence a partition, so their order is the topic's order).
This is exact after every trigger, including an --once run whose last windows are still
open. With --output-mode append each window is written once, when final, i.e. only after
the watermark passes its end: a bounded run leaves the newest windows unwritten until later
events advance the watermark (the "send one event far in the future" trick).

--once runs trigger(availableNow=True): everything in the topic when the query starts, in
micro-batches of at most --max-offsets-per-trigger records, then stops. Without it the
query runs until interrupted (Ctrl-C stops it cleanly), a micro-batch per
--trigger-interval. A restart with the same --checkpoint continues after the last committed
batch (startingOffsets only applies to a new checkpoint) with the window state restored.

Exit codes: 0 done, 1 the query failed, 2 setup problem (no reachable broker, no Java 17,
no Maven for the first connector download).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_jobs.session import add_session_arguments, cli_session, first_line, stop_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

ISO_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka records -> (user_id, page, ts, event_time); malformed values dropped."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("user_id", StringType()),
            StructField("page", StringType()),
            StructField("ts", LongType()),
        ]
    )
    return (
        raw.select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.*")
        .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
    )


def page_counts(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Windowed counts as Kafka records: key = page, value = the JSON described above."""
    from pyspark.sql import functions as F

    counts = (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window), F.col("page"))
        .count()
    )
    return counts.select(
        F.col("page").alias("key"),
        F.to_json(
            F.struct(
                F.date_format("window.start", ISO_FORMAT).alias("window_start"),
                F.date_format("window.end", ISO_FORMAT).alias("window_end"),
                F.col("page"),
                F.col("count"),
            )
        ).alias("value"),
    )


def start_query(
    spark: SparkSession,
    bootstrap: str,
    checkpoint: str,
    *,
    events_topic: str = "events",
    output_topic: str = "page-counts",
    once: bool = False,
    max_offsets_per_trigger: int | None = None,
    starting_offsets: str = "earliest",
    window: str = "1 minute",
    watermark: str = "10 minutes",
    output_mode: str = "update",
    trigger_interval: str = "5 seconds",
    query_name: str | None = None,
    kafka_options: dict[str, str] | None = None,
) -> StreamingQuery:
    if output_mode not in ("update", "append"):
        raise ValueError(f"output mode {output_mode!r}: update or append")
    # Window bounds are written as UTC ISO-8601 strings.
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    extra = {f"kafka.{k}": v for k, v in (kafka_options or {}).items()}
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", events_topic)
        .option("startingOffsets", starting_offsets)
        .options(**extra)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    records = page_counts(parse_events(reader.load()), window, watermark)
    writer = (
        records.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .options(**extra)
        .option("checkpointLocation", checkpoint)
        .outputMode(output_mode)
    )
    if query_name:
        writer = writer.queryName(query_name)
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger_interval)
    return writer.start()


@dataclass
class RunSummary:
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    seconds: float = 0.0
    progress: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        rate = self.input_rows / self.seconds if self.seconds else 0.0
        return (
            f"{self.input_rows} events in {self.batches} micro-batches, {self.output_rows} "
            f"window updates written, {self.seconds:.1f}s ({rate:,.0f} events/s)"
        )


def summarize(query: StreamingQuery, seconds: float) -> RunSummary:
    summary = RunSummary(seconds=seconds, progress=list(query.recentProgress))
    for progress in summary.progress:
        rows = progress.get("numInputRows") or 0
        if rows:  # not counted: no-data batches (state cleanup after the watermark moved)
            summary.batches += 1
            summary.input_rows += rows
        written = (progress.get("sink") or {}).get("numOutputRows") or 0
        summary.output_rows += max(written, 0)
    return summary


def stop_between_batches(query: StreamingQuery, timeout: float = 60.0) -> None:
    """Stop the query, if possible while no micro-batch runs (stopping one mid-way aborts its
    write, harmlessly but with ERROR lines; it is redone after a restart)."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def run_once(spark: SparkSession, bootstrap: str, checkpoint: str, **options: Any) -> RunSummary:
    """One availableNow run to the end of the topic; raises if the query fails."""
    began = time.monotonic()
    query = start_query(spark, bootstrap, checkpoint, once=True, **options)
    query.awaitTermination()
    return summarize(query, time.monotonic() - began)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.page_counts",
        description="Windowed page-view counts from Kafka to Kafka (Spark Structured Streaming).",
    )
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of the Kafka broker")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument("--once", action="store_true", help="trigger(availableNow=True), then exit")
    parser.add_argument("--events-topic", default="events")
    parser.add_argument("--output-topic", default="page-counts")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--starting-offsets", default="earliest", help="for a new checkpoint")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="10 minutes")
    parser.add_argument("--output-mode", choices=["update", "append"], default="update")
    parser.add_argument("--trigger-interval", default="5 seconds")
    add_session_arguments(parser)
    args = parser.parse_args(argv)
    spark = cli_session(args.bootstrap, "page-counts", args)
    if spark is None:
        return 2
    options = dict(
        events_topic=args.events_topic,
        output_topic=args.output_topic,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        starting_offsets=args.starting_offsets,
        window=args.window,
        watermark=args.watermark,
        output_mode=args.output_mode,
    )
    try:
        if args.once:
            summary = run_once(spark, args.bootstrap, args.checkpoint, **options)
            print(f"page-counts: {summary}", flush=True)
            return 0
        began = time.monotonic()
        query = start_query(
            spark,
            args.bootstrap,
            args.checkpoint,
            trigger_interval=args.trigger_interval,
            **options,
        )
        print(
            f"page-counts: streaming {args.events_topic} -> {args.output_topic} every "
            f"{args.trigger_interval}; Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        # Ctrl-C / SIGTERM only set a flag (pyspark's own SIGINT handler would call into the
        # JVM from inside a py4j call); the query is stopped between waits.
        stop = threading.Event()
        previous = {
            sig: signal.signal(sig, lambda signum, frame: stop.set())
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            while not stop.is_set() and not query.awaitTermination(1):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        stop_between_batches(query)
        print(f"page-counts: {summarize(query, time.monotonic() - began)}", flush=True)
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a failed query: one line here, the JVM's log above it
        print(f"error: the streaming query failed: {first_line(exc)}", file=sys.stderr)
        return 1
    finally:
        stop_session(spark)


if __name__ == "__main__":
    sys.exit(main())
