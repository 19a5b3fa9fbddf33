"""kafkalite broker benchmark: produce/consume throughput, produce latency, RSS, cold start.

    python -m bench.broker_bench [--messages N] [--size 1024] [--target kafkalite|HOST:PORT]
                                 [--bootstrap HOST:PORT] [--json out.json]

With `--target kafkalite` (the default) a broker is started in a temporary directory
(kafkalite.testing.BrokerProcess, a separate process from this client); with a bootstrap
address (`--target HOST:PORT` or `--bootstrap HOST:PORT`) an external broker, such as Apache
Kafka, is measured instead (broker RSS, CPU and cold start are then not measured).

Every run creates its own 1-partition topics. Figures are payload bytes (message values)
with 1 MB = 2**20 bytes, as Kafka's perf tools count. This prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka

from bench import procstat, workloads
from kafkalite.testing import BrokerProcess

PRODUCE_BAR_MB_S = 60.0
CONSUME_BAR_MB_S = 120.0
DEFAULT_MESSAGES = 5_000_000
COLD_START_RUNS = 3
PHASES = ("produce", "latency", "consume", "transactions", "cold-start")
TRANSACTIONS = 100  # of TRANSACTION_RECORDS records each
TRANSACTION_RECORDS = 1000


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class ProfiledBrokerProcess(BrokerProcess):
    """A BrokerProcess run under cProfile (the profile is written on clean shutdown)."""

    def __init__(self, data_dir: Path, profile_out: Path) -> None:
        super().__init__(data_dir)
        self.profile_out = profile_out

    def command(self) -> list[str]:
        cmd = super().command()
        assert cmd[1:3] == ["-m", "kafkalite"]
        return [cmd[0], "-m", "cProfile", "-o", str(self.profile_out), *cmd[1:]]


# -- phases -------------------------------------------------------------------------------


def measure_cold_start(base: Path, runs: int) -> dict[str, Any]:
    """Spawn a broker on an empty data dir and time the first answered ApiVersions request.

    The clock starts just before the process is spawned (interpreter start-up and imports
    included) and stops when a raw ApiVersions v0 request, retried every 2 ms, is answered.
    """
    times: list[float] = []
    reported: list[float] = []
    for run in range(runs):
        port = procstat.free_port()
        broker = BrokerProcess(
            base / f"cold-{run}", overrides={"listeners": f"PLAINTEXT://127.0.0.1:{port}"}
        )
        failure: list[BaseException] = []

        def start(broker: BrokerProcess = broker, failure: list[BaseException] = failure) -> None:
            try:
                broker.start()
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        spawned = time.perf_counter()
        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        try:
            answered = procstat.wait_until_answering("127.0.0.1", port, timeout=60)
        finally:
            starter.join(60)
            broker.stop()
        if failure:
            raise RuntimeError("cold-start broker failed") from failure[0]
        times.append((answered - spawned) * 1000)
        for line in broker.lines:
            if "kafkalite started" in line and line.rstrip().endswith(" ms)"):
                reported.append(float(line.rstrip()[:-4].rsplit("(", 1)[1]))
    return {
        "runs_ms": [round(t, 1) for t in times],
        "median_ms": statistics.median(times),
        "first_ms": times[0],
        "broker_reported_ms": reported,
    }


def settle(local: bool) -> float:
    """Write back dirty pages before a timed phase so no phase pays for an earlier one's
    writeback (on a local broker; sync(2) is machine-wide). Returns the seconds it took."""
    if not local:
        return 0.0
    started = time.perf_counter()
    os.sync()
    return time.perf_counter() - started


def phase_cpu(meter: procstat.CpuMeter) -> dict[str, float | None]:
    return {
        "broker_cpu_pct": meter.percent(meter.broker_cpu),
        "broker_sys_pct": meter.percent(meter.broker_sys),
        "client_cpu_pct": meter.percent(meter.client_cpu),
        "broker_cpu_s": meter.broker_cpu,
        "broker_sys_s": meter.broker_sys,
        "client_cpu_s": meter.client_cpu,
    }


def run_phases(
    args: argparse.Namespace, results: dict[str, Any], bootstrap: str, pid: int | None
) -> None:
    """The timed phases; figures go into `results`.

    Latency first, on a quiet broker and machine; then throughput, consume last (it reads
    the acks=1 topic back)."""
    run_id = f"{int(time.time())}-{os.getpid()}"

    latency: dict[str, Any] = {}
    for acks in ("1", "all") if "latency" in args.phases else ():
        topic = f"bench-{run_id}-latency-acks{acks}"
        workloads.create_topic(bootstrap, topic)
        settle(pid is not None)
        log(f"latency acks={acks}: {args.latency_rate:g} msg/s for {args.latency_seconds:g}s")
        lat, achieved = workloads.produce_latency(
            bootstrap,
            topic,
            args.latency_rate,
            args.latency_seconds,
            args.size,
            acks,
            args.linger_ms,
        )
        if lat.errors:
            raise RuntimeError(f"latency acks={acks}: {lat.errors} errors ({lat.first_error})")
        latency[acks] = {**lat.summary_ms(), "achieved_msg_s": achieved}
    results["latency_fixed_rate"] = latency

    produce: dict[str, Any] = {}
    topics = {}
    for acks in ("1", "all") if "produce" in args.phases else ():
        topic = topics[acks] = f"bench-{run_id}-acks{acks}"
        how = workloads.create_topic(bootstrap, topic)
        synced = settle(pid is not None)
        log(f"produce acks={acks}: {args.messages} x {args.size} B to {topic} ({how})")
        with procstat.CpuMeter(pid) as meter:
            result = workloads.produce_throughput(
                bootstrap, topic, args.messages, args.size, acks, args.linger_ms
            )
        low, high = workloads.high_watermark(bootstrap, topic)
        if high - low != args.messages or result.latency.errors:
            raise RuntimeError(
                f"acks={acks}: partition holds {high - low} of {args.messages} messages, "
                f"{result.latency.errors} sampled delivery errors "
                f"({result.latency.first_error})"
            )
        produce[acks] = {
            "topic_created_by": how,
            "mb_s": result.mb_per_s,
            "msg_s": result.msg_per_s,
            "seconds": result.seconds,
            "latency_under_load": result.latency.summary_ms(),
            "client_errors": result.client_errors[:5],
            "sync_before_s": synced,
            **phase_cpu(meter),
        }
        log(f"  {result.mb_per_s:.1f} MB/s, {result.msg_per_s:,.0f} msg/s")
    results["produce"] = produce

    if "consume" in args.phases:
        synced = settle(pid is not None)
        log(f"consume {args.messages} messages from {topics['1']}")
        with procstat.CpuMeter(pid) as meter:
            consumed = workloads.consume_all(bootstrap, topics["1"], args.messages)
        results["consume"] = {
            "mb_s": consumed.mb_per_s,
            "msg_s": consumed.msg_per_s,
            "seconds": consumed.seconds,
            "first_message_ms": consumed.first_message_s * 1000,
            "client_errors": consumed.client_errors[:5],
            "sync_before_s": synced,
            **phase_cpu(meter),
        }
        log(f"  {consumed.mb_per_s:.1f} MB/s, {consumed.msg_per_s:,.0f} msg/s")


def run_transactions(
    args: argparse.Namespace, results: dict[str, Any], bootstrap: str, pid: int | None
) -> None:
    """Transactional produce: throughput and the latency of each commit."""
    topic = f"bench-{int(time.time())}-{os.getpid()}-txn"
    workloads.create_topic(bootstrap, topic)
    settle(pid is not None)
    log(f"transactions: {args.transactions} x {TRANSACTION_RECORDS} x {args.size} B to {topic}")
    with procstat.CpuMeter(pid) as meter:
        result = workloads.produce_transactions(
            bootstrap, topic, args.transactions, TRANSACTION_RECORDS, args.size, args.linger_ms
        )
    low, high = workloads.high_watermark(bootstrap, topic)
    expected = result.messages + result.transactions  # a commit marker per transaction
    if high - low != expected:
        raise RuntimeError(f"transactions: partition holds {high - low} offsets, not {expected}")
    results["transactions"] = {
        "mb_s": result.mb_per_s,
        "msg_s": result.msg_per_s,
        "seconds": result.seconds,
        "transactions": result.transactions,
        "records_per_transaction": TRANSACTION_RECORDS,
        "commit": result.commit_ms,
        **phase_cpu(meter),
    }
    log(
        f"  {result.mb_per_s:.1f} MB/s, commit p50 {result.commit_ms['p50_ms']:.2f} ms "
        f"p99 {result.commit_ms['p99_ms']:.2f} ms"
    )


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "target": args.target,
        "config": {
            "messages": args.messages,
            "size": args.size,
            "linger_ms": args.linger_ms,
            "partitions": 1,
            "latency_rate_msg_s": args.latency_rate,
            "latency_seconds": args.latency_seconds,
            "mb": "2**20 bytes of message payload",
        },
        "environment": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0],
            "platform": platform.platform(),
        },
        "bars": {"produce_mb_s": PRODUCE_BAR_MB_S, "consume_mb_s": CONSUME_BAR_MB_S},
    }
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kafkalite-bench-")))
        broker: BrokerProcess | None = None
        if args.target == "kafkalite":
            if args.broker_profile:
                broker = ProfiledBrokerProcess(tmp / "data", Path(args.broker_profile).resolve())
            else:
                broker = BrokerProcess(tmp / "data")
            log("starting kafkalite broker")
            broker.start()
            stack.callback(broker.stop)
            bootstrap = broker.bootstrap
            pid = broker.process.pid if broker.process else None
        else:
            # An external broker; bench.compare passes the pid of one it started.
            bootstrap, pid = args.target, getattr(args, "broker_pid", None)
        results["bootstrap"] = bootstrap
        log(f"bootstrap {bootstrap}" + (f", broker pid {pid}" if pid else ""))
        try:
            run_phases(args, results, bootstrap, pid)
            if "transactions" in args.phases:
                run_transactions(args, results, bootstrap, pid)
        except BaseException:
            if broker is not None:
                tail = "".join(broker.lines[-20:]).rstrip() or "(no output)"
                log(f"the run failed; last broker output:\n{tail}")
            raise
        if pid is not None:
            results["broker_peak_rss_mib"] = (procstat.status_kib(pid, "VmHWM") or 0) / 1024
            results["broker_cpu_total_s"] = procstat.cpu_seconds(pid)
        if broker is not None:
            broker.stop()
            if args.cold_start_runs and "cold-start" in args.phases:
                log(f"cold start x{args.cold_start_runs}")
                results["cold_start"] = measure_cold_start(tmp, args.cold_start_runs)
    return results


# -- report -------------------------------------------------------------------------------


def _verdict(value: float, bar: float) -> str:
    return "PASS" if value >= bar else "FAIL"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _broker_cpu(figures: dict[str, Any]) -> str:
    if figures.get("broker_cpu_pct") is None:
        return "broker CPU not measured"
    return (
        f"broker CPU {_pct(figures['broker_cpu_pct'])} ({_pct(figures['broker_sys_pct'])} kernel)"
    )


def format_table(results: dict[str, Any]) -> str:
    cfg = results["config"]
    rows: list[tuple[str, str, str, str]] = []
    for acks, figures in results.get("produce", {}).items():
        mb = figures["mb_s"]
        rows.append(
            (
                f"produce throughput acks={acks}",
                f"{mb:8.1f} MB/s  {figures['msg_s']:>9,.0f} msg/s",
                f">= {PRODUCE_BAR_MB_S:g} MB/s {_verdict(mb, PRODUCE_BAR_MB_S)}",
                f"{_broker_cpu(figures)}, "
                f"client CPU {_pct(figures['client_cpu_pct'])}, {figures['seconds']:.1f}s",
            )
        )
    for acks, lat in results.get("latency_fixed_rate", {}).items():
        rows.append(
            (
                f"produce latency acks={acks}",
                f"p50 {lat['p50_ms']:6.2f} ms  p99 {lat['p99_ms']:6.2f} ms",
                "-",
                f"fixed rate {lat['achieved_msg_s']:,.0f} msg/s, {lat['samples']} msgs, "
                f"max {lat['max_ms']:.1f} ms",
            )
        )
    for acks, figures in results.get("produce", {}).items():
        lat = figures["latency_under_load"]
        rows.append(
            (
                f"produce latency acks={acks} saturated",
                f"p50 {lat['p50_ms']:6.2f} ms  p99 {lat['p99_ms']:6.2f} ms",
                "-",
                f"throughput run, 1 in 100 msgs ({lat['samples']}); includes client queueing",
            )
        )
    txn = results.get("transactions")
    if txn:
        commit = txn["commit"]
        rows.append(
            (
                "transactional produce",
                f"{txn['mb_s']:8.1f} MB/s  {txn['msg_s']:>9,.0f} msg/s",
                "-",
                f"{txn['transactions']} x {txn['records_per_transaction']} records, "
                f"{_broker_cpu(txn)}, {txn['seconds']:.1f}s",
            )
        )
        rows.append(
            (
                "commit latency",
                f"p50 {commit['p50_ms']:6.2f} ms  p99 {commit['p99_ms']:6.2f} ms",
                "-",
                f"commit_transaction() after flush(), {commit['samples']} commits, "
                f"max {commit['max_ms']:.1f} ms",
            )
        )
    consume = results.get("consume")
    if consume:
        rows.append(
            (
                "consume throughput",
                f"{consume['mb_s']:8.1f} MB/s  {consume['msg_s']:>9,.0f} msg/s",
                f">= {CONSUME_BAR_MB_S:g} MB/s {_verdict(consume['mb_s'], CONSUME_BAR_MB_S)}",
                f"{_broker_cpu(consume)}, "
                f"client CPU {_pct(consume['client_cpu_pct'])}, {consume['seconds']:.1f}s, "
                f"first msg {consume['first_message_ms']:.0f} ms",
            )
        )
    if "broker_peak_rss_mib" in results:
        rows.append(
            (
                "broker peak RSS",
                f"{results['broker_peak_rss_mib']:8.1f} MiB",
                "-",
                "VmHWM at the end of the run",
            )
        )
    if "cold_start" in results:
        cold = results["cold_start"]
        runs = ", ".join(f"{t:.0f}" for t in cold["runs_ms"])
        reported = ", ".join(f"{t:.0f}" for t in cold["broker_reported_ms"])
        rows.append(
            (
                "cold start to first answer",
                f"{cold['median_ms']:8.0f} ms",
                "-",
                f"median of [{runs}] ms, spawn to ApiVersions answer "
                f"(broker's own log: {reported} ms)",
            )
        )
    headers = ("measure", "result", "bar", "notes")
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(3)]
    lines = [
        f"kafkalite benchmark: target {results['target']} ({results['bootstrap']}), "
        f"1 partition, {cfg['messages']:,} x {cfg['size']} B messages per run, "
        f"linger.ms={cfg['linger_ms']:g}, MB = 2^20 payload bytes",
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)) + "  " + headers[3],
        "  ".join("-" * w for w in widths) + "  " + "-" * 5,
    ]
    for row in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[3]
        )
    return "\n".join(lines)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.broker_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--messages",
        type=int,
        default=DEFAULT_MESSAGES,
        help=f"messages per throughput run (default {DEFAULT_MESSAGES:,})",
    )
    parser.add_argument("--size", type=int, default=1024, help="message value bytes")
    parser.add_argument(
        "--target",
        default="kafkalite",
        help="'kafkalite' (start a broker) or HOST:PORT of a running broker",
    )
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="measure an external broker (same as --target HOST:PORT)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--linger-ms", type=float, default=5.0)
    parser.add_argument(
        "--latency-rate", type=float, default=1000.0, help="msg/s of the fixed-rate latency runs"
    )
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--cold-start-runs", type=int, default=COLD_START_RUNS)
    parser.add_argument(
        "--transactions",
        type=int,
        default=TRANSACTIONS,
        help=f"transactions of {TRANSACTION_RECORDS} records in the transactions phase",
    )
    parser.add_argument(
        "--broker-profile",
        metavar="PATH",
        help="run the benchmarked broker under cProfile, writing PATH",
    )
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated subset of {','.join(PHASES)} (consume needs produce)",
    )
    args = parser.parse_args(argv)
    args.phases = set(filter(None, args.phases.split(",")))
    if args.phases - set(PHASES):
        parser.error(f"unknown phase(s): {', '.join(sorted(args.phases - set(PHASES)))}")
    if "consume" in args.phases and "produce" not in args.phases:
        parser.error("the consume phase reads what the produce phase wrote")
    if args.bootstrap:
        args.target = args.bootstrap
    if args.messages < 1 or args.size < 1:
        parser.error("--messages and --size must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.perf_counter()
    results = run_benchmark(args)
    results["total_seconds"] = time.perf_counter() - started
    print(format_table(results))
    print(f"(whole run {results['total_seconds']:.0f}s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        log(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
