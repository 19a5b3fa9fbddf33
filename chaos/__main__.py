"""python -m chaos: one seeded chaos run (see chaos/README.md). Exit 0 when the checker finds
nothing wrong, 1 when it does, 2 for a bad argument or a target that cannot start."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.runner import WORKLOADS, Options, run
from chaos.schedule import KINDS
from kafkalite.maven_dist import ProvisionError


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds (default 120)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--faults",
        default="kill,pause,term,drop,latency,blackhole",
        help=f"comma-separated, of: {','.join(KINDS)}",
    )
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--target", choices=("kafkalite", "kafka"), default="kafkalite")
    parser.add_argument("--workload", choices=WORKLOADS, default="produce-consume")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100.0, help="records/s per producer")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--stall-bound", type=float, default=30.0, help="seconds")
    parser.add_argument("--runs-dir", type=Path, default=Path("data/chaos"))
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
        stall_bound=args.stall_bound, runs_dir=args.runs_dir,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    try:
        _, verdict = run(options)
    except ProvisionError as exc:
        print(f"chaos: cannot start {options.target}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chaos: interrupted; every process was stopped", file=sys.stderr)
        return 130
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
