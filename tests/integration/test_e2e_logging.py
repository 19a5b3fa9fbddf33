"""Broker logs: kafkalite.log.format=json gives one JSON object per line, kafkalite.log.levels
sets levels per logger, notable events get one line each, a client's mistake no traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import (
    CLIENT_TIMEOUT,
    admin,
    create_topic,
    low_watermark,
    produce_all,
    producer,
    segment_files,
    wait_until,
)

from compat.cli_runner import kafkalite_here, ok
from kafkalite.testing import BrokerProcess


def _records(broker: BrokerProcess) -> list[dict]:
    return [json.loads(line) for line in broker.output().splitlines()]


def test_json_lines_per_logger_levels_and_notable_events(broker_factory, topic_name) -> None:
    broker = broker_factory(
        {
            "kafkalite.log.format": "json",
            "kafkalite.log.levels": "kafkalite.apis.metadata=WARN,kafkalite.server=debug",
        }
    )
    name, auto = topic_name(), topic_name("auto")
    create_topic(broker.bootstrap, name, partitions=2, config={"retention.ms": "60000"})
    ok(kafkalite_here("consume", name, "--group", "g1", "-b", broker.bootstrap))  # joins g1
    admin(broker.bootstrap).delete_topics([name])[name].result(timeout=CLIENT_TIMEOUT)
    admin(broker.bootstrap).list_topics(topic=auto, timeout=CLIENT_TIMEOUT)  # auto-creates
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.sendall(b"\xff\xff\xff\xff")  # a negative frame size: the client's mistake
        assert sock.recv(1) == b""  # the broker closed the connection
    broker.stop()

    records = _records(broker)  # every line parses: no stray text, no traceback lines
    assert all(set(r) == {"time", "level", "logger", "message"} for r in records)
    messages = [(r["level"], r["logger"], r["message"]) for r in records]
    assert messages[0][2].startswith("kafkalite started: node 0")
    assert messages[-1] == ("INFO", "kafkalite", "kafkalite stopped cleanly")
    assert (
        "INFO",
        "kafkalite.apis.create_topics",
        f"created topic {name}: 2 partition(s), replication factor 1, "
        "configs {'retention.ms': '60000'}",
    ) in messages
    rebalanced = [m for m in messages if m[2].startswith("Stabilized group g1 ")]
    assert rebalanced == [
        ("INFO", "kafkalite.coordinator", "Stabilized group g1 generation 1 with 1 members")
    ]
    deleted = [m for m in messages if m[1] == "kafkalite.apis.delete_topics"]
    assert len(deleted) == 1 and deleted[0][2].startswith(f"deleted topic {name} (id ")
    # kafkalite.apis.metadata at WARN: its INFO line for the auto-created topic is not logged.
    assert (broker.data_dir / f"{auto}-0").is_dir()
    assert not [m for m in messages if m[1] == "kafkalite.apis.metadata"]
    closing = [m for m in messages if m[2].startswith("closing connection from")]
    assert len(closing) == 1 and closing[0][:2] == ("WARNING", "kafkalite.server")
    assert not [m for m in messages if m[0] == "ERROR"]


def test_one_line_per_segment_deleted_by_retention(broker_factory, topic_name) -> None:
    broker = broker_factory(
        {"kafkalite.log.format": "json", "log.retention.check.interval.ms": "200"}
    )
    topic = topic_name()
    create_topic(
        broker.bootstrap, topic, config={"segment.bytes": "1024", "retention.bytes": "2048"}
    )
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(prod, topic, ({"value": b"x" * 200, "partition": 0} for _ in range(60)))
    wait_until(lambda: low_watermark(broker.bootstrap, topic), message="retention")
    broker.stop()
    kept = [int(f.name.removesuffix(".log")) for f in segment_files(broker.data_dir, topic, 0)]
    records = [r for r in _records(broker) if f"{topic}-0: deleting segment " in r["message"]]
    assert all((r["level"], r["logger"]) == ("INFO", "kafkalite.storage") for r in records)
    deleted = [int(r["message"].rsplit(" ", 1)[1]) for r in records]
    assert deleted[0] == 0 and deleted == sorted(set(deleted)) and deleted[-1] < kept[0]
    rounds = [
        r["message"] for r in _records(broker) if r["message"].startswith("retention deleted")
    ]
    assert sum(int(m.split()[2]) for m in rounds) == len(deleted)


def test_log_level_off_but_for_one_logger(broker_factory, topic_name) -> None:
    """kafkalite.log.level sets every logger; a per-logger level wins for its subtree."""
    broker = broker_factory(
        {
            "kafkalite.log.level": "ERROR",
            "kafkalite.log.levels": "kafkalite=INFO,kafkalite.apis=OFF",
        }
    )
    create_topic(broker.bootstrap, topic_name())
    broker.stop()
    lines = broker.output().splitlines()
    assert [line.split(" ", 3)[3] for line in lines] == [
        lines[0].split(" ", 3)[3],  # the started line: kafkalite at INFO
        "kafkalite.server: received SIGTERM, shutting down",
        "kafkalite: kafkalite stopped cleanly",
    ]
    assert "created topic" not in broker.output()


@pytest.mark.parametrize(
    "override",
    [
        "kafkalite.log.level=LOUD",
        "kafkalite.log.levels=kafkalite.storage",
        "kafkalite.log.levels==DEBUG",
        "kafkalite.log.format=xml",
    ],
)
def test_bad_log_property_exits_2_with_one_line(tmp_path: Path, override: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalite",
            "serve",
            "--override",
            override,
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and override.split("=")[0] in result.stderr
