"""How fast a test gets a broker: time from asking for one to its first answered request.

    .venv/bin/python -m bench.fixture_start [--runs 20] [--kafka-runs 2] [--no-kafka]

Prints figures, it is not a test. Every time runs until a raw ApiVersions v0 request is
answered (bench/procstat.py):

- pytest fixture: `kafkalite_fresh_broker` in a generated test file run by pytest (the plugin
  comes from the installed entry point); the clock starts in a fixture requested just before
  it. The first test pays for importing the broker's modules (cold), the others are warm.
- EmbeddedBroker: the context manager (kafkalite.testing) in a fresh interpreter (cold: the
  broker's imports included) and then again in the same process (warm).
- BrokerProcess: a `kafkalite serve` subprocess (interpreter start and imports included).
- Apache Kafka: compat/kafka_server.py's KRaft broker, as a testcontainers-style Kafka start
  without the container (so a lower bound for one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench import procstat

_PYTEST_FILE = textwrap.dedent(
    """
    import time
    import pytest
    from bench import procstat

    @pytest.fixture
    def requested():
        return time.perf_counter()

    @pytest.mark.parametrize("run", range({runs}))
    def test_start(requested, kafkalite_fresh_broker, run):
        broker = kafkalite_fresh_broker
        assert procstat.api_versions_ok(broker.host, broker.port)
        with open({out!r}, "a") as out:
            out.write(f"{{(time.perf_counter() - requested) * 1000}}\\n")
    """
)

_COLD_EMBEDDED = textwrap.dedent(
    """
    import time
    from bench import procstat
    from kafkalite.testing import EmbeddedBroker
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        assert procstat.api_versions_ok(broker.host, broker.port)
        print((time.perf_counter() - started) * 1000)
    """
)


def _answered_after(start: object) -> float:
    """ms from calling `start()` (which returns the running broker) to an answered request."""
    began = time.perf_counter()
    broker = start()  # type: ignore[operator]
    try:
        assert procstat.api_versions_ok(broker.host, broker.port, timeout=10)
        return (time.perf_counter() - began) * 1000
    finally:
        broker.stop()


def pytest_fixture(runs: int, tmp: Path) -> list[float]:
    out = tmp / "fixture-ms.txt"
    test_file = tmp / "test_fixture_start.py"
    test_file.write_text(_PYTEST_FILE.format(runs=runs, out=str(out)))
    root = Path(__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=root,
        check=True,
        capture_output=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    return [float(line) for line in out.read_text().split()]


def embedded(runs: int) -> tuple[list[float], list[float]]:
    root = Path(__file__).resolve().parent.parent
    cold = [
        float(
            subprocess.run(
                [sys.executable, "-c", _COLD_EMBEDDED],
                cwd=root,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(3)
    ]
    from kafkalite.testing import EmbeddedBroker

    _answered_after(lambda: EmbeddedBroker().start())  # imports done
    warm = [_answered_after(lambda: EmbeddedBroker().start()) for _ in range(runs)]
    return cold, warm


def process(runs: int, tmp: Path) -> list[float]:
    from kafkalite.testing import BrokerProcess

    return [_answered_after(lambda i=i: BrokerProcess(tmp / f"p{i}").start()) for i in range(runs)]


def kafka(runs: int, tmp: Path) -> list[float]:
    from compat.kafka_dist import kafka_lib
    from compat.kafka_server import KafkaServer

    kafka_lib()  # download outside the clock
    return [_answered_after(lambda i=i: KafkaServer(tmp / f"k{i}").start()) for i in range(runs)]


def _summary(times: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(times), 1),
        "first_ms": round(times[0], 1),
        "runs": len(times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--kafka-runs", type=int, default=2)
    parser.add_argument("--no-kafka", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fixture-start-") as name:
        tmp = Path(name)
        fixture = pytest_fixture(args.runs, tmp)
        cold, warm = embedded(args.runs)
        results = {
            "pytest fixture, first test (cold)": _summary(fixture[:1]),
            "pytest fixture, later tests (warm)": _summary(fixture[1:]),
            "EmbeddedBroker, fresh interpreter (cold)": _summary(cold),
            "EmbeddedBroker, warm": _summary(warm),
            "BrokerProcess (kafkalite serve subprocess)": _summary(process(3, tmp)),
        }
        if not args.no_kafka:
            results["Apache Kafka (compat/, KRaft, no container)"] = _summary(
                kafka(args.kafka_runs, tmp)
            )
    kafka_ms = results.get("Apache Kafka (compat/, KRaft, no container)", {}).get("median_ms")
    print(f"{'start to first answered request':48} {'median':>10} {'first':>10}  vs Kafka")
    for label, figures in results.items():
        ratio = f"{kafka_ms / figures['median_ms']:8.0f}x" if kafka_ms else ""
        print(f"{label:48} {figures['median_ms']:8.1f}ms {figures['first_ms']:8.1f}ms  {ratio}")
    print(json.dumps(results), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
