"""Batch report: the top pages of every hour, from a range of offsets of the events topic.

    python -m spark_jobs.report --bootstrap HOST:PORT [--topic events]
        [--starting-offsets earliest|JSON] [--ending-offsets latest|JSON] [--top 5]
        [--master URL] [--conf KEY=VALUE ...] [--log-level LEVEL]

Reads with spark.read.format("kafka") from startingOffsets (inclusive) to endingOffsets
(exclusive): "earliest" / "latest", or Spark's JSON form {"events": {"0": 120, "1": -2}}
where -2 stands for earliest and -1 for latest (ending only); a JSON must name every
partition of the topic (Spark's rule). Hours are event time (ts), UTC. Within an hour pages
are ranked by views, ties by page name; `users` counts distinct user ids.

`top_pages_per_hour()` returns the rows, for tests: (hour start in epoch millis, rank,
page, views, users), hours ascending, ranks ascending.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from spark_jobs.events import iso_utc
from spark_jobs.page_counts import parse_events
from spark_jobs.session import add_session_arguments, cli_session, first_line, stop_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ReportRow = tuple[int, int, str, int, int]


def top_pages_per_hour(
    spark: SparkSession,
    bootstrap: str,
    topic: str = "events",
    *,
    starting_offsets: str = "earliest",
    ending_offsets: str = "latest",
    top: int = 5,
) -> list[ReportRow]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .option("endingOffsets", ending_offsets)
        .load()
    )
    per_page = (
        parse_events(raw)
        .groupBy(F.date_trunc("hour", F.col("event_time")).alias("hour"), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"), F.countDistinct("user_id").alias("users"))
    )
    ranking = Window.partitionBy("hour").orderBy(F.col("views").desc(), F.col("page").asc())
    ranked = (
        per_page.withColumn("rank", F.row_number().over(ranking))
        .where(F.col("rank") <= top)
        .select(F.unix_millis("hour").alias("hour_ms"), "rank", "page", "views", "users")
        .orderBy("hour_ms", "rank")
    )
    return [(row.hour_ms, row.rank, row.page, row.views, row.users) for row in ranked.collect()]


def format_table(rows: list[ReportRow]) -> str:
    header = ("hour (UTC)", "rank", "page", "views", "users")
    body = [(iso_utc(hour), str(rank), page, str(v), str(u)) for hour, rank, page, v, u in rows]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    right = {1, 3, 4}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def _offsets_arg(text: str) -> str:
    if text in ("earliest", "latest"):
        return text
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not earliest/latest nor JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError('JSON offsets look like {"events": {"0": 42}}')
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.report",
        description="Top pages per hour from a range of offsets of the events topic.",
    )
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of the Kafka broker")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--starting-offsets", type=_offsets_arg, default="earliest")
    parser.add_argument("--ending-offsets", type=_offsets_arg, default="latest")
    parser.add_argument("--top", type=int, default=5)
    add_session_arguments(parser)
    args = parser.parse_args(argv)
    spark = cli_session(args.bootstrap, "page-report", args)
    if spark is None:
        return 2
    try:
        rows = top_pages_per_hour(
            spark,
            args.bootstrap,
            args.topic,
            starting_offsets=args.starting_offsets,
            ending_offsets=args.ending_offsets,
            top=args.top,
        )
    except Exception as exc:
        print(f"error: the report failed: {first_line(exc)}", file=sys.stderr)
        return 1
    finally:
        stop_session(spark)
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
