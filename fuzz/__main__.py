"""python -m fuzz --frames N --seed S: fuzz a fresh broker process; exit 1 on any finding.

The broker runs in a temporary data directory (kept with --keep). The same seed sends the same
mutants; --start-batch replays from a batch a finding was reported in.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from fuzz.campaign import Settings, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--frames", type=int, default=50_000, help="mutants to send")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=2000, help="mutants between checks")
    parser.add_argument("--lanes", type=int, default=8, help="parallel connections")
    parser.add_argument("--frame-timeout", type=float, default=2.0, help="seconds per mutant")
    parser.add_argument("--probe-bound", type=float, default=10.0, help="seconds for the probe")
    parser.add_argument("--start-batch", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the broker's data directory")
    parser.add_argument("--quiet", action="store_true", help="no line per batch")
    args = parser.parse_args(argv)
    if args.frames <= 0 or args.batch <= 0 or args.lanes <= 0:
        parser.error("--frames, --batch and --lanes must be positive")
    settings = Settings(
        frames=args.frames,
        seed=args.seed,
        batch=args.batch,
        lanes=args.lanes,
        frame_timeout=args.frame_timeout,
        probe_bound=args.probe_bound,
        start_batch=args.start_batch,
    )
    data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-fuzz-"))
    signal.signal(signal.SIGTERM, _interrupt)  # stop the broker on the way out
    try:
        report = run(settings, data_dir, progress=not args.quiet)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"data directory kept: {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(report.summary())
    return 0 if report.clean else 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
