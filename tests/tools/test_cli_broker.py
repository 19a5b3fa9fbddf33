"""CLI behaviour that needs a kafkalite broker with particular settings, or a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

from compat.cli_runner import kafkalite_here, ok, ok_json, one_line_error


def test_unknown_topic_fails_at_once_without_auto_creation(broker_factory) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    bootstrap = ["--bootstrap", broker.bootstrap]
    started = time.monotonic()
    one_line_error(kafkalite_here("produce", "nosuch", *bootstrap, stdin="x\n"), 1, "nosuch")
    one_line_error(kafkalite_here("consume", "nosuch", *bootstrap), 1, "does not exist")
    assert time.monotonic() - started < 15  # not the producer's 30 s message timeout
    ok(kafkalite_here("topic", "create", "two", "-p", "2", *bootstrap))
    one_line_error(kafkalite_here("produce", "two", "-p", "7", *bootstrap, stdin="x\n"), 1, "two")
    one_line_error(kafkalite_here("consume", "two", "-p", "7", *bootstrap), 1, "no partition 7")
    one_line_error(
        kafkalite_here(
            "group", "reset-offsets", "g", "--topic", "nosuch", "--to-earliest", *bootstrap
        ),
        1,
        "unknown topic nosuch",
    )
    assert "nosuch" not in ok(kafkalite_here("topic", "list", *bootstrap))


def test_progress_line_on_a_terminal(broker_factory, tmp_path: Path) -> None:
    """stderr a terminal: produce --file and consume draw a progress line with rate and ETA."""
    broker = broker_factory()
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"message {i}\n" for i in range(2000)))
    for command in (["produce", "p", "--file", str(lines)], ["consume", "p", "-f", "%o\\n"]):
        leader, follower = pty.openpty()
        try:
            result = subprocess.run(
                [sys.executable, "-m", "kafkalite", *command, "-b", broker.bootstrap],
                stdout=subprocess.PIPE,
                stderr=follower,
                timeout=120,
                text=True,
            )
            os.close(follower)
            drawn = b""
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the terminal has no writer left
                    break
                if not chunk:
                    break
                drawn += chunk
        finally:
            os.close(leader)
        assert result.returncode == 0
        last = drawn.decode().rsplit("\r\x1b[K", 1)[-1]
        assert last.startswith("[########################] 100% "), last
        assert "/s ETA 00:00" in last
    assert result.stdout.splitlines() == [str(i) for i in range(2000)]


def test_topic_describe_shows_held_delayed_records_from_the_metrics(broker_factory) -> None:
    from kafkalite.testing import free_ports

    (port,) = free_ports(1)
    broker = broker_factory({"kafkalite.metrics.port": str(port)})
    bootstrap = ["--bootstrap", broker.bootstrap]
    config = ["-c", "kafkalite.delayed.delivery.enable=true"]
    ok(kafkalite_here("topic", "create", "later", "-p", "2", *config, *bootstrap))
    ok(
        kafkalite_here(
            "produce",
            "later",
            "-p",
            "1",
            "-H",
            "kafkalite-delay-ms=600000",
            *bootstrap,
            stdin="a\nb\n",
        )
    )
    metrics = ["--metrics", f"http://127.0.0.1:{port}/metrics"]
    [topic] = ok_json(
        kafkalite_here("topic", "describe", "later", *metrics, "--format", "json", *bootstrap)
    )
    held = [(p["held_records"], p["next_due"] is not None) for p in topic["partitions"]]
    assert held == [(0, False), (2, True)]
    assert [p["log_end_offset"] for p in topic["partitions"]] == [0, 0]
    table = ok(kafkalite_here("topic", "describe", "later", *metrics, *bootstrap))
    assert "HELD" in table.splitlines()[1] and "NEXT-DUE" in table.splitlines()[1]


def test_client_properties_reach_every_client(broker_factory) -> None:
    """-X goes to the admin client, the producer and the consumer (it crashed with
    "dictionary update sequence element #0 has length 13")."""
    broker = broker_factory()
    common = ["-b", broker.bootstrap, "-X", "client.id=cli-test"]
    ok(kafkalite_here("topic", "create", "x", *common))
    assert "x" in ok(kafkalite_here("topic", "list", *common))
    ok(kafkalite_here("produce", "x", *common, stdin="one\ntwo\n"))
    read_committed = ["-X", "isolation.level=read_committed"]
    consume = ["consume", "x", "--from-beginning", "-c", "2"]
    consumed = kafkalite_here(*consume, *common, *read_committed)
    assert ok(consumed).splitlines() == ["one", "two"]


def test_config_get_lists_every_broker_config_with_its_source(broker_factory) -> None:
    broker = broker_factory({"log.retention.hours": "48"})
    bootstrap = ["-b", broker.bootstrap, "--format", "json"]
    (node,) = ok_json(kafkalite_here("cluster", "info", *bootstrap))["brokers"]
    keys = ["log.retention.ms", "log.retention.hours", "num.partitions"]
    entries = ok_json(kafkalite_here("config", "get", "broker", str(node["id"]), *keys, *bootstrap))
    assert [(e["name"], e["value"], e["source"]) for e in entries] == [
        ("log.retention.hours", "48", "static_broker"),
        ("log.retention.ms", None, "default"),
        ("num.partitions", "1", "static_broker"),
    ]


def test_produce_null_empty_makes_tombstones(broker_factory) -> None:
    broker = broker_factory()
    bootstrap = ["-b", broker.bootstrap]
    ok(kafkalite_here("produce", "z", "-K", ":", "-Z", *bootstrap, stdin="a:1\nb:\n:\n"))
    ok(kafkalite_here("produce", "z", "-K", ":", *bootstrap, stdin="c:\n"))
    lines = ok(kafkalite_here("consume", "z", "--from-beginning", "-f", "json", *bootstrap))
    messages = [json.loads(line) for line in lines.splitlines()]
    assert [(m["key"], m["value"]) for m in messages] == [
        ("a", "1"),
        ("b", None),  # a tombstone
        (None, None),
        ("c", ""),  # without -Z: an empty value
    ]


def test_produce_reads_lines_by_an_input_template(broker_factory) -> None:
    """rpk's `-f`: key, value, partition and headers per line; a line that does not fit ends
    the command with one line, after sending the lines before it."""
    broker = broker_factory()
    bootstrap = ["-b", broker.bootstrap]
    ok(kafkalite_here("topic", "create", "tpl", "-p", "2", *bootstrap))
    lines = "1|k1|color=red,size=2|first value\n0|k2||second|value\n"
    ok(kafkalite_here("produce", "tpl", "-f", "%p|%k|%h|%v", *bootstrap, stdin=lines))
    one_line_error(
        kafkalite_here(
            "produce", "tpl", "-f", "%k %v", "-p", "0", *bootstrap, stdin="k3 c\nnone\n"
        ),
        1,
        "does not match",
    )
    out = ok(kafkalite_here("consume", "tpl", "-f", "json", *bootstrap))
    messages = sorted((json.loads(line) for line in out.splitlines()), key=lambda m: m["key"])
    got = [(m["partition"], m["key"], m["value"], m["headers"]) for m in messages]
    assert got == [
        (1, "k1", "first value", [["color", "red"], ["size", "2"]]),
        (0, "k2", "second|value", []),
        (0, "k3", "c", []),  # -p where the template has no %p
    ]


def test_topic_describe_and_list_say_a_view_is_a_view_of_its_source(broker_factory) -> None:
    broker = broker_factory()
    bootstrap = ["--bootstrap", broker.bootstrap]
    ok(kafkalite_here("topic", "create", "orders", "-p", "2", *bootstrap))
    view = ["-c", "kafkalite.view.source=orders", "-c", "kafkalite.view.filter=region = 'eu'"]
    ok(kafkalite_here("topic", "create", "orders-eu", *view, *bootstrap))
    [described] = ok_json(
        kafkalite_here("topic", "describe", "orders-eu", "--format", "json", *bootstrap)
    )
    assert described["view_of"] == "orders" and len(described["partitions"]) == 2
    [source] = ok_json(
        kafkalite_here("topic", "describe", "orders", "--format", "json", *bootstrap)
    )
    assert source["view_of"] is None
    table = ok(kafkalite_here("topic", "describe", "orders-eu", *bootstrap))
    assert table.splitlines()[0].endswith("; a view of orders")

    listing = ok_json(kafkalite_here("topic", "list", "--format", "json", *bootstrap))
    assert listing == [
        {
            "name": "orders",
            "partitions": 2,
            "replication_factor": 1,
            "view_of": None,
            "filter": None,
        },
        {
            "name": "orders-eu",
            "partitions": 2,
            "replication_factor": 1,
            "view_of": "orders",
            "filter": "region = 'eu'",
        },
    ]
    header, source_row, view_row = ok(kafkalite_here("topic", "list", *bootstrap)).splitlines()
    assert header.split() == ["TOPIC", "PARTITIONS", "REPLICAS", "VIEW-OF", "FILTER"]
    assert source_row.split() == ["orders", "2", "1", "-", "-"]
    assert view_row.split() == ["orders-eu", "2", "1", "orders", "region", "=", "'eu'"]
