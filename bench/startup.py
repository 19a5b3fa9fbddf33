"""Start-up figures: the CLI's CPU time and a `kafkalite serve` process's first answer.

    .venv/bin/python -m bench.startup [--runs 5]

Prints figures, it is not a test. Every figure is the median of `--runs` fresh interpreters
(`python -m kafkalite ...`, the code on this interpreter's path):

- `kafkalite --help`, `kafkalite topic list --help`: CPU (user + system) and wall time.
- `kafkalite topic list` against a running broker: CPU and wall time (librdkafka's threads
  included).
- broker: exec of `kafkalite serve` on an empty data dir to the first answered ApiVersions
  request (a raw request retried every 2 ms, bench/procstat.py), and the broker's CPU by then.
- which heavy test-only modules a CLI or broker process imports (there should be none).

Python compiles every module it imports from source when PYTHONDONTWRITEBYTECODE is set and
no `__pycache__` exists: the figures then include compiling; the header says which case it is.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import procstat

TEST_ONLY_MODULES = ("hypothesis", "pytest", "_pytest")
_IMPORTED = (
    "import sys, kafkalite.cli, kafkalite.server, kafkalite.broker.broker, kafkalite.tools;"
    "print(' '.join(m for m in {modules!r} if m in sys.modules))"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(args: Sequence[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `python -m kafkalite ARGS` run."""
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kafkalite", *args], check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - wall0, _children_cpu() - cpu0


def first_answer(data_dir: Path) -> tuple[float, float]:
    """(seconds from exec to the first answered request, broker CPU seconds by then)."""
    port = procstat.free_port()
    command = [
        sys.executable,
        "-m",
        "kafkalite",
        "serve",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={data_dir}",
    ]
    spawned = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        answered = procstat.wait_until_answering("127.0.0.1", port, timeout=60)
        cpu = procstat.cpu_seconds(process.pid) or 0.0
        return answered - spawned, cpu
    finally:
        process.terminate()
        process.wait(timeout=30)


def imported_test_modules() -> str:
    code = _IMPORTED.format(modules=TEST_ONLY_MODULES)
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return result.stdout.decode().strip() or "none"


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    compiled = (
        "no (compiled from source every run)"
        if os.environ.get("PYTHONDONTWRITEBYTECODE")
        else "yes (or written on the first run)"
    )
    print(f"bytecode cache used: {compiled}; load average {os.getloadavg()[0]:.1f}")
    print(f"test-only modules imported by the CLI and broker: {imported_test_modules()}")
    rows: list[tuple[str, tuple[float, float]]] = []
    with tempfile.TemporaryDirectory(prefix="startup-") as name:
        tmp = Path(name)
        broker = [first_answer(tmp / f"b{i}") for i in range(args.runs)]
        rows.append(("broker: exec to first answered request", _median(broker)))
        for label, cli_args in (
            ("kafkalite --help", ["--help"]),
            ("kafkalite topic list --help", ["topic", "list", "--help"]),
        ):
            runs = [run_cli(cli_args) for _ in range(args.runs)]
            rows.append((label, _median(runs)))
        port = procstat.free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafkalite",
                "serve",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"log.dirs={tmp / 'srv'}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            procstat.wait_until_answering("127.0.0.1", port, timeout=60)
            runs = [run_cli(["topic", "list", "-b", f"127.0.0.1:{port}"]) for _ in range(args.runs)]
        finally:
            server.terminate()
            server.wait(timeout=30)
        rows.append(("kafkalite topic list (a running broker)", _median(runs)))
    print(f"{'median of ' + str(args.runs) + ' runs':44} {'wall s':>8} {'CPU s':>8}")
    for label, (wall, cpu) in rows:
        print(f"{label:44} {wall:8.3f} {cpu:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
