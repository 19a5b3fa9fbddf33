"""How long a SIGTERMed broker's controlled shutdown takes, and whether it ends cleanly
(issue 22, point 7).

    .venv/bin/python -m bench.controlled_shutdown [--partitions 600] [--json out.json]

Starts a ZooKeeper and three brokers in a temporary directory, creates one topic of
`--partitions` partitions with replication factor 3 (a third of them led by broker 2), waits
for full ISRs, sends broker 2 SIGTERM and reads its log: the time from "Starting controlled
shutdown" to its success (or to its unclean shutdown), and the retries it needed. It prints
figures, it is not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster.zookeeper_server import ZooKeeperServer
from kafkalite.testing import BrokerProcess, stop_all

TOPIC = "many"
STOPPED = 2
_RECORD = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ \S+ "


def _when(output: str, message: str) -> datetime | None:
    found = re.search(_RECORD + re.escape(message), output, re.MULTILINE)
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f") if found else None


def _until(condition: Any, what: str, wait_s: float = 300.0) -> None:
    deadline = time.monotonic() + wait_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def measure(partitions: int, root: Path) -> dict[str, Any]:
    zookeeper = ZooKeeperServer(root / "zookeeper").start()
    brokers: dict[int, BrokerProcess] = {}
    try:
        connect = f"{zookeeper.connect_string}/bench-{uuid.uuid4().hex[:8]}"
        for broker_id in (1, 2, 3):
            config = {
                "broker.id": str(broker_id),
                "zookeeper.connect": connect,
                "auto.leader.rebalance.enable": "false",
            }
            brokers[broker_id] = BrokerProcess(root / f"broker-{broker_id}", config).start()
        admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
        _until(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
        admin.create_topics([NewTopic(TOPIC, partitions, 3)])[TOPIC].result(120)

        def placed() -> list[Any]:
            return list(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values())

        _until(
            lambda: len(found := placed()) == partitions and all(len(p.isrs) == 3 for p in found),
            "full ISRs",
        )
        led = sum(1 for p in placed() if p.leader == STOPPED)
        exit_code = brokers[STOPPED].stop()
        output = brokers[STOPPED].output()
        started = _when(output, "Starting controlled shutdown")
        clean = _when(output, "Controlled shutdown request returned successfully") or _when(
            output, "Controlled shutdown succeeded"
        )
        ended = clean or _when(output, "Proceeding to do an unclean shutdown")
        assert started is not None and ended is not None
        return {
            "partitions": partitions,
            "led_by_stopped_broker": led,
            "exit_code": exit_code,
            "outcome": "clean" if clean else "unclean",
            "seconds": round((ended - started).total_seconds(), 2),
            "retries": output.count("Retrying controlled shutdown")
            + output.count("Controlled shutdown attempt"),  # the old code's wording
        }
    finally:
        stop_all(brokers.values())
        zookeeper.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=600)
    parser.add_argument("--json", type=Path, help="also write the figures there")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkalite-shutdown-bench-") as root:
        figures = measure(args.partitions, Path(root))
    print(" ".join(f"{key}={value}" for key, value in figures.items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
