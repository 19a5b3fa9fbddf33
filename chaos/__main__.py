"""python -m chaos: one seeded chaos run (see chaos/README.md). Exit 0 when the checker finds
nothing wrong, 1 when it does, 2 for a bad argument or a target that cannot start."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path

from chaos.compare import main as compare_main
from chaos.runner import WORKLOADS, Options, TargetError, run
from chaos.schedule import KINDS
from kafkalite.maven_dist import ProvisionError


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds (default 120)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--faults",
        default="kill,pause,term,drop,latency,blackhole",
        help=f'comma-separated, of: {",".join(KINDS)}; "" for a run without faults',
    )
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument(
        "--target",
        choices=("kafkalite", "kafka", "both"),
        default="kafkalite",
        help="both: the same schedule on kafkalite, then on Apache Kafka, findings labelled",
    )
    parser.add_argument("--workload", choices=WORKLOADS, default="produce-consume")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100.0, help="records/s per producer")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--stall-bound", type=float, default=30.0, help="seconds")
    parser.add_argument("--runs-dir", type=Path, default=Path("data/chaos"))
    parser.add_argument(
        "--tiered",
        action="store_true",
        help="tier the topic to an S3 server (gofakes3); implied by the s3 fault kind",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL and ACLs; the workload logs in as a SCRAM user (kafkalite only)",
    )
    args = parser.parse_args(argv)
    faults = [kind.strip() for kind in args.faults.split(",") if kind.strip()]
    unknown = [kind for kind in faults if kind not in KINDS]
    if unknown:
        parser.error(f"unknown fault kind(s) {','.join(unknown)} (known: {','.join(KINDS)})")
    if args.brokers < 1 or args.duration <= 0 or args.rate <= 0:
        parser.error("--brokers, --duration and --rate must be positive")
    return Options(
        duration=args.duration, seed=args.seed, faults=faults, brokers=args.brokers,
        target=args.target, workload=args.workload, producers=args.producers,
        consumers=args.consumers, rate=args.rate, partitions=args.partitions,
        stall_bound=args.stall_bound, runs_dir=args.runs_dir, tiered=args.tiered,
        secure=args.secure,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    # SIGTERM ends a run as Ctrl-C does: the harness stops every process it started. SIGINT is
    # set too, as a shell starting `python -m chaos &` has it ignored.
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, signal.default_int_handler)
    targets = ["kafkalite", "kafka"] if options.target == "both" else [options.target]
    results = {}
    try:
        for target in targets:
            results[target] = run(dataclasses.replace(options, target=target))
    except (ProvisionError, TargetError) as exc:
        print(f"chaos: cannot run against {options.target}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chaos: interrupted; every process was stopped", file=sys.stderr)
        return 130
    if len(results) == 2:
        compare_main([str(results["kafkalite"][0]), str(results["kafka"][0])])
    return 0 if all(verdict["ok"] for _, verdict in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
