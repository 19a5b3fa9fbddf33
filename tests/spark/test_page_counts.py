"""Spark Structured Streaming jobs (spark_jobs/) against a real broker, checked exactly.

The generator's events (with the partition and offset of each) give the expected counts in
plain Python (spark_jobs/events.py); the jobs' output is read back with confluent-kafka.
The pipeline runs in update mode: the count of a (window, page) is its last record in
`page-counts` (see spark_jobs/page_counts.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.events import Event, expected_top_pages, expected_window_counts, parse_iso_utc
from spark_jobs.generator import generate, make_events
from spark_jobs.kafka_util import Record, end_offsets, ensure_topic, read_topic
from spark_jobs.page_counts import run_once
from spark_jobs.report import top_pages_per_hour

from .conftest import SparkTarget

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
START = 1_735_725_600_000  # 2025-01-01T10:00:00Z
WindowKey = tuple[int, str]


def window_records(records: list[Record]) -> list[tuple[WindowKey, int]]:
    """page-counts records -> [((window start ms, page), count)] in topic order per key."""
    rows = []
    for record in records:
        value = json.loads(record.value)
        assert record.key == value["page"].encode()
        start, end = parse_iso_utc(value["window_start"]), parse_iso_utc(value["window_end"])
        assert end - start == 60_000
        rows.append(((start, value["page"]), value["count"]))
    return rows


def last_counts(records: list[Record]) -> dict[WindowKey, int]:
    """The current count of every window: its last record (update mode)."""
    return dict(window_records(records))


def after(records: list[Record], offsets: dict[int, int]) -> list[Record]:
    return [r for r in records if r.offset >= offsets.get(r.partition, 0)]


def python_m(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m ARGS` in its own process, from the repository root, output captured."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_window_counts_exact(
    spark: Any, kafka_target: SparkTarget, topic_name: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_target.bootstrap
    events_topic, counts_topic = topic_name("events"), topic_name("counts")
    ensure_topic(bootstrap, counts_topic, partitions=2)
    events = generate(bootstrap, events_topic, 3000, seed=11, start_ts=START, partitions=3)
    assert len(events) == 3000
    # Deterministic: the same seed and start give the same events.
    assert events == make_events(3000, seed=11, start_ts=START)

    summary = run_once(
        spark,
        bootstrap,
        str(tmp_path / "checkpoint"),
        events_topic=events_topic,
        output_topic=counts_topic,
        max_offsets_per_trigger=1000,
    )
    assert summary.input_rows == 3000
    assert 3 <= summary.batches <= 4  # maxOffsetsPerTrigger splits the backlog (rounding)

    records = read_topic(bootstrap, counts_topic)
    expected = expected_window_counts(events)
    assert len(expected) > 100  # 5 minutes x 25 pages, most of them hit
    assert last_counts(records) == expected
    assert summary.output_rows == len(records)
    # Update mode: a window's counts only grow from record to record.
    seen: dict[WindowKey, int] = {}
    for key, count in window_records(records):
        assert count > seen.get(key, 0)
        seen[key] = count


def test_restart_from_checkpoint_processes_only_new_events(
    spark: Any, kafka_target: SparkTarget, topic_name: Callable[..., str], tmp_path: Path
) -> None:
    """A first run in this session, then the CLI in its own process (a new JVM) on the same
    checkpoint after more events: it reads only the new ones, and every total stays exact,
    including the window both batches of events fall into (its state came from the
    checkpoint)."""
    bootstrap = kafka_target.bootstrap
    events_topic, counts_topic = topic_name("events"), topic_name("counts")
    ensure_topic(bootstrap, counts_topic, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    first = generate(bootstrap, events_topic, 1500, seed=21, start_ts=START, partitions=3)
    summary = run_once(
        spark, bootstrap, str(checkpoint), events_topic=events_topic, output_topic=counts_topic
    )
    assert (summary.input_rows, summary.batches) == (1500, 1)
    assert last_counts(read_topic(bootstrap, counts_topic)) == expected_window_counts(first)
    marks = end_offsets(bootstrap, counts_topic)

    # Continues where the first events stopped: 150 s in, inside the window [120 s, 180 s).
    second = generate(bootstrap, events_topic, 1200, seed=22, start_ts=START + 150_000)
    shared = set(expected_window_counts(first)) & set(expected_window_counts(second))
    assert shared  # the restart must restore window state to get these right
    result = python_m(
        "spark_jobs.page_counts",
        "--bootstrap",
        bootstrap,
        "--checkpoint",
        str(checkpoint),
        "--once",
        "--events-topic",
        events_topic,
        "--output-topic",
        counts_topic,
        "--max-offsets-per-trigger",
        "500",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(r"page-counts: (\d+) events in (\d+) micro-batches", result.stdout)
    assert match, result.stdout
    assert int(match.group(1)) == 1200
    assert 3 <= int(match.group(2)) <= 4  # at most 500 per micro-batch

    records = read_topic(bootstrap, counts_topic)
    new_records = after(records, marks)
    # Only the windows the new events touched were written again, with their totals.
    everything = expected_window_counts(first + second)
    touched = set(expected_window_counts(second))
    assert set(last_counts(new_records)) == touched
    assert last_counts(new_records) == {k: everything[k] for k in touched}
    assert last_counts(records) == everything


def test_append_mode_emits_each_final_window_once(
    spark: Any, kafka_target: SparkTarget, topic_name: Callable[..., str], tmp_path: Path
) -> None:
    """The alternative output mode: one record per window, once the watermark passed it.
    An event a day later moves the watermark past every earlier window."""
    bootstrap = kafka_target.bootstrap
    events_topic, counts_topic = topic_name("events"), topic_name("counts")
    ensure_topic(bootstrap, counts_topic, partitions=1)
    events = generate(bootstrap, events_topic, 1000, seed=31, start_ts=START, partitions=2)
    generate(bootstrap, events_topic, 1, seed=32, start_ts=START + 86_400_000, max_lateness_ms=0)
    run_once(
        spark,
        bootstrap,
        str(tmp_path / "checkpoint"),
        events_topic=events_topic,
        output_topic=counts_topic,
        output_mode="append",
        watermark="1 minute",
    )
    rows = window_records(read_topic(bootstrap, counts_topic))
    assert len(rows) == len({key for key, _ in rows})  # each window once
    assert dict(rows) == expected_window_counts(events)  # the far event's window is open


def test_report_exact_for_offset_range(
    spark: Any, kafka_target: SparkTarget, topic_name: Callable[..., str]
) -> None:
    bootstrap = kafka_target.bootstrap
    topic = topic_name("events")
    # About 3.3 hours of events (one every 4 s), in 3 partitions.
    events = generate(
        bootstrap, topic, 3000, seed=41, start_ts=START + 1_234_567, spacing_ms=4000, partitions=3
    )
    ends = end_offsets(bootstrap, topic)
    assert sum(ends.values()) == 3000

    whole = top_pages_per_hour(spark, bootstrap, topic, top=4)
    assert whole == expected_top_pages(events, top=4)
    assert len({hour for hour, *_ in whole}) == 4

    # A range: partition 0 from its quarter to three quarters, partition 1 from its start
    # (-2 = earliest) to its half, partition 2 from its half to its end (-1 = latest).
    lo = {0: ends[0] // 4, 1: 0, 2: ends[2] // 2}
    hi = {0: 3 * ends[0] // 4, 1: ends[1] // 2, 2: ends[2]}
    starting = json.dumps({topic: {"0": lo[0], "1": -2, "2": lo[2]}})
    ending = json.dumps({topic: {"0": hi[0], "1": hi[1], "2": -1}})
    chosen = [e for e in events if lo[e.partition] <= e.offset < hi[e.partition]]
    assert 0 < len(chosen) < len(events)
    ranged = top_pages_per_hour(
        spark, bootstrap, topic, starting_offsets=starting, ending_offsets=ending, top=3
    )
    assert ranged == expected_top_pages(chosen, top=3)


def test_cli_broker_down_exits_2_at_once(tmp_path: Path) -> None:
    """No Spark is started: the broker check comes first, and says so in one line."""
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    commands = [
        ["spark_jobs.page_counts", "--checkpoint", str(tmp_path / "c"), "--once"],
        ["spark_jobs.report"],
        ["spark_jobs.generator", "--count", "1"],
    ]
    for command in commands:
        began = time.monotonic()
        result = python_m(*command, "--bootstrap", f"127.0.0.1:{port}", timeout=60)
        assert result.returncode == 2, (command, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: no Kafka broker reachable"), lines
        assert time.monotonic() - began < 10


def test_generator_cli_prints_what_it_produced(
    kafka_target: SparkTarget, topic_name: Callable[..., str]
) -> None:
    topic = topic_name("events")
    result = python_m(
        "spark_jobs.generator",
        "--bootstrap",
        kafka_target.bootstrap,
        "--topic",
        topic,
        "--count",
        "200",
        "--seed",
        "5",
        "--pages",
        "7",
        "--start-ts",
        "2025-01-01T10:00:00Z",
        "--print-events",
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    printed = [Event(**json.loads(line)) for line in result.stdout.splitlines()]
    assert printed == make_events(200, seed=5, pages=7, start_ts=START)
    stored = {(r.partition, r.offset): r for r in read_topic(kafka_target.bootstrap, topic)}
    assert len(stored) == 200
    for event in printed:
        record = stored[(event.partition, event.offset)]
        assert (record.key, record.value) == (event.key(), event.value())
    assert "200 events" in result.stderr
