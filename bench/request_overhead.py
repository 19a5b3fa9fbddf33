"""Broker CPU per request on the hot path, for measuring what per-request bookkeeping costs.

    PYTHONPATH=. .venv/bin/python -m bench.request_overhead [--requests 10000]

Starts a broker (metrics served on a free port), then sends `--requests` small Produce
requests (one 10-record batch, acks=1), then as many Fetch requests, and as many
ApiVersions, one at a time over one connection, and prints the broker's CPU (user + system,
from /proc) and the client's wall time per request for each kind. To compare two versions
of the code, run it alternately with each on PYTHONPATH (the broker subprocess inherits it).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.procstat import cpu_seconds
from kafkalite.storage.records import encode_batch
from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, build, fetch_request, produce_request
from tests.integration.e2e_helpers import create_topic

TOPIC = "overhead"


def measure(broker: BrokerProcess, kind: str, count: int) -> tuple[float, float]:
    """(broker CPU µs, wall µs) per request."""
    assert broker.process is not None
    batch = encode_batch([(b"k", b"v" * 100)] * 10, timestamp=int(time.time() * 1000))
    requests = {
        "produce": lambda: produce_request(TOPIC, 0, batch, acks=1),
        "fetch": lambda: fetch_request(TOPIC, 0, 0, max_bytes=4096, partition_max_bytes=4096),
        "api_versions": lambda: build(
            18, 3, "ApiVersionsRequest", client_software_name="b", client_software_version="1"
        ),
    }
    make = requests[kind]
    with RawClient(broker.host, broker.port) as client:
        for _ in range(200):  # warm-up
            client.request(make())
        cpu_before, wall_before = cpu_seconds(broker.process.pid), time.perf_counter()
        for _ in range(count):
            client.request(make())
        wall = time.perf_counter() - wall_before
        cpu = (cpu_seconds(broker.process.pid) or 0.0) - (cpu_before or 0.0)
    return cpu / count * 1e6, wall / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        with BrokerProcess(Path(data_dir), {"kafkalite.metrics.port": "0"}) as broker:
            create_topic(broker.bootstrap, TOPIC)
            for kind in ("produce", "fetch", "api_versions"):
                cpu, wall = measure(broker, kind, args.requests)
                print(f"{kind:>12}: broker CPU {cpu:6.1f} µs/request, wall {wall:6.1f} µs")


if __name__ == "__main__":
    main()
