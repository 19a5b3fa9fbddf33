"""The broker benchmark against kafkalite and real Apache Kafka, one after the other.

    python -m bench.compare [--messages N] [--size 1024] [--out bench/results]
                            [--cold-start-runs 3] [--transactions 100] [--phases ...]

Both brokers run on this machine with their default fsync policy (neither fsyncs per
write: log.flush.interval.messages is unset), 1 partition, 1 KiB messages, linger.ms=5.
Kafka is provisioned from Maven Central by compat/ (KRaft, one combined node). Prints a
table with both figures and the ratio kafkalite/Kafka, and writes it as Markdown, JSON and
a PNG bar chart under bench/results/. This prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import broker_bench
from compat.kafka_server import KafkaServer

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_MESSAGES = 1_000_000


@dataclass(frozen=True)
class Row:
    measure: str
    unit: str
    kafkalite: float | None
    kafka: float | None
    higher_is_better: bool

    @property
    def ratio(self) -> float | None:
        if not self.kafkalite or not self.kafka:
            return None
        return self.kafkalite / self.kafka

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return ""
        better = self.ratio >= 1 if self.higher_is_better else self.ratio <= 1
        return "kafkalite better" if better else "Kafka better"


def log(message: str) -> None:
    print(f"[compare] {message}", file=sys.stderr, flush=True)


def bench_args(args: argparse.Namespace, target: str) -> argparse.Namespace:
    argv = [
        "--messages",
        str(args.messages),
        "--size",
        str(args.size),
        "--target",
        target,
        "--cold-start-runs",
        str(args.cold_start_runs),
        "--transactions",
        str(args.transactions),
        "--phases",
        args.phases,
    ]
    return broker_bench._parse_args(argv)


def run_kafkalite(args: argparse.Namespace) -> dict[str, Any]:
    log("kafkalite: running the benchmark")
    return broker_bench.run_benchmark(bench_args(args, "kafkalite"))


def run_kafka(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    log("Apache Kafka: starting (provisioned by compat/)")
    server = KafkaServer(base / "kafka").start()
    try:
        bench = bench_args(args, server.bootstrap)
        bench.broker_pid = server.pid
        log(f"Apache Kafka: running the benchmark against {server.bootstrap}")
        results = broker_bench.run_benchmark(bench)
    finally:
        server.stop()
    if args.cold_start_runs and "cold-start" in bench.phases:
        results["cold_start"] = kafka_cold_start(base, args.cold_start_runs)
    return results


def kafka_cold_start(base: Path, runs: int) -> dict[str, Any]:
    """Spawn to first answered ApiVersions, as for kafkalite (storage formatted before)."""
    times = []
    for run in range(runs):
        server = KafkaServer(base / f"kafka-cold-{run}")
        server.format()
        started = time.perf_counter()
        server.start()
        times.append((time.perf_counter() - started) * 1000)
        server.stop()
    return {"runs_ms": times, "median_ms": statistics.median(times)}


def get(results: dict[str, Any], *path: str) -> Any:
    """The figure at `path`, None where that run has none."""
    value: Any = results
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def write_results(out: Path, stem_name: str, text: str, results: dict[str, Any]) -> Path:
    """`<stem_name>.md` (the table) and `.json` (every figure) under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / stem_name
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    return stem


def rows(ours: dict[str, Any], theirs: dict[str, Any]) -> list[Row]:
    table = []
    for acks in ("1", "all"):
        table.append(
            Row(
                f"produce acks={acks}",
                "MB/s",
                get(ours, "produce", acks, "mb_s"),
                get(theirs, "produce", acks, "mb_s"),
                True,
            )
        )
    table.append(
        Row("consume", "MB/s", get(ours, "consume", "mb_s"), get(theirs, "consume", "mb_s"), True)
    )
    for acks in ("1", "all"):
        for pct in ("p50", "p99"):
            table.append(
                Row(
                    f"produce latency {pct} acks={acks}",
                    "ms",
                    get(ours, "latency_fixed_rate", acks, f"{pct}_ms"),
                    get(theirs, "latency_fixed_rate", acks, f"{pct}_ms"),
                    False,
                )
            )
    table.append(
        Row(
            "transactional produce (1,000 x 1 KiB per transaction)",
            "MB/s",
            get(ours, "transactions", "mb_s"),
            get(theirs, "transactions", "mb_s"),
            True,
        )
    )
    for pct in ("p50", "p99"):
        table.append(
            Row(
                f"commit latency {pct}",
                "ms",
                get(ours, "transactions", "commit", f"{pct}_ms"),
                get(theirs, "transactions", "commit", f"{pct}_ms"),
                False,
            )
        )
    table.append(
        Row(
            "broker peak RSS",
            "MiB",
            get(ours, "broker_peak_rss_mib"),
            get(theirs, "broker_peak_rss_mib"),
            False,
        )
    )
    table.append(
        Row(
            "time to first answered request",
            "ms",
            get(ours, "cold_start", "median_ms"),
            get(theirs, "cold_start", "median_ms"),
            False,
        )
    )
    return table


def ratio_table(table: list[Row]) -> list[str]:
    """The markdown table of kafkalite's and Kafka's figures with their ratio."""
    lines = [
        "| measure | kafkalite | Apache Kafka | kafkalite/Kafka | |",
        "|---|---|---|---|---|",
    ]
    for row in table:
        ratio = "n/a" if row.ratio is None else f"{row.ratio:.2f}"
        lines.append(
            f"| {row.measure} ({row.unit}) | {_fmt(row.kafkalite)} | {_fmt(row.kafka)} "
            f"| {ratio} | {row.verdict} |"
        )
    return lines


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def markdown(table: list[Row], args: argparse.Namespace) -> str:
    lines = [
        f"kafkalite vs Apache Kafka, {datetime.date.today()}: 1 partition, "
        f"{args.messages:,} x {args.size} B messages, linger.ms=5, same machine, one run each",
        "",
        *ratio_table(table),
    ]
    return "\n".join(lines) + "\n"


def chart(table: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for row in table if row.ratio is not None]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(shown) + 1.5))
    names = [f"{row.measure} ({row.unit})" for row in shown]
    ratios = [row.ratio for row in shown]
    colours = ["tab:green" if row.verdict == "kafkalite better" else "tab:orange" for row in shown]
    ax.barh(names, ratios, color=colours, left=0)
    ax.set_xscale("log")  # ratios: 0.5 and 2 are equally far from parity
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("kafkalite / Apache Kafka, log scale (green: kafkalite better)")
    ax.invert_yaxis()
    for y, ratio in enumerate(ratios):
        ax.text(ratio, y, f" {ratio:.2f}", va="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--cold-start-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--transactions", type=int, default=broker_bench.TRANSACTIONS)
    parser.add_argument(
        "--phases",
        default=",".join(broker_bench.PHASES),
        help="comma-separated subset of the benchmark's phases (default: all)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafkalite-compare-") as tmp:
        ours = run_kafkalite(args)
        theirs = run_kafka(args, Path(tmp))
    table = rows(ours, theirs)
    text = markdown(table, args)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / "compare"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(
        json.dumps({"kafkalite": ours, "kafka": theirs}, indent=2, default=str) + "\n"
    )
    chart(table, stem.with_suffix(".png"))
    log(f"written {stem}.md, .json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
