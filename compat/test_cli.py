"""The admin CLI (`kafkalite topic|group|produce|consume|cluster|config`) against kafkalite and
Apache Kafka: every command's output (JSON, and tables for people) parsed and compared with
what was written; a broker's refusal is one line and exit code 1."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer

from compat.cli_runner import kafkalite_here, ok, ok_json, one_line_error
from compat.targets import Target


def cli(target: Target, *args: str, stdin: str | None = None):
    return kafkalite_here(*args, "--bootstrap", target.bootstrap, "--timeout", "20", stdin=stdin)


def _names(listing: list[dict]) -> list[str]:
    return [topic["name"] for topic in listing]


def test_topic_lifecycle(target: Target, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    created = ok_json(
        cli(
            target,
            "topic",
            "create",
            name,
            "-p",
            "3",
            "-c",
            "retention.ms=123456",
            "--format",
            "json",
        )
    )
    assert [(t["name"], len(t["partitions"])) for t in created["created"]] == [(name, 3)]
    listing = ok_json(cli(target, "topic", "list", "--format", "json"))
    plain = {"view_of": None, "filter": None}  # not a view (kafkalite's views, issue 18)
    assert {"name": name, "partitions": 3, "replication_factor": 1, **plain} in listing
    assert not any(n.startswith("__") for n in _names(listing))

    (described,) = ok_json(cli(target, "topic", "describe", name, "--format", "json"))
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for partition in described["partitions"]:
        leader = partition["leader"]
        assert partition["replicas"] == [leader] and partition["isr"] == [leader]
        assert (partition["log_start_offset"], partition["log_end_offset"]) == (0, 0)
    assert described["configs"]["retention.ms"] == "123456"

    ok(
        cli(
            target,
            "topic",
            "alter-config",
            name,
            "-s",
            "cleanup.policy=compact",
            "-d",
            "retention.ms",
        )
    )
    configs = ok_json(
        cli(target, "config", "get", "topic", name, "--overrides", "--format", "json")
    )
    assert {c["name"]: c["value"] for c in configs} == {"cleanup.policy": "compact"}
    ok(cli(target, "config", "set", "topic", name, "retention.ms=1000", "-d", "cleanup.policy"))
    (entry,) = ok_json(
        cli(target, "config", "get", "topic", name, "retention.ms", "--format", "json")
    )
    assert (entry["value"], entry["source"]) == ("1000", "dynamic_topic")

    ok(cli(target, "topic", "add-partitions", name, "--total", "5"))
    (grown,) = ok_json(cli(target, "topic", "describe", name, "--format", "json"))
    assert len(grown["partitions"]) == 5

    table = ok(cli(target, "topic", "describe", name))
    assert table.splitlines()[1].split() == [
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "LOG-START",
        "LOG-END",
        "SIZE",
    ]
    assert len(table.splitlines()) == 2 + 5

    assert ok_json(cli(target, "topic", "delete", name, "--format", "json")) == {"deleted": [name]}
    assert name not in _names(ok_json(cli(target, "topic", "list", "--format", "json")))


def test_topic_refusals(target: Target, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    ok(cli(target, "topic", "create", name))
    one_line_error(cli(target, "topic", "create", name), 1, name, "already exists")
    one_line_error(cli(target, "topic", "describe", topic_name("missing")), 1, "cannot describe")
    one_line_error(cli(target, "topic", "delete", topic_name("missing")), 1, "cannot delete")
    one_line_error(cli(target, "topic", "add-partitions", name, "--total", "1"), 1, name)
    one_line_error(cli(target, "config", "set", "topic", name, "no.such.config=1"), 1, name)
    one_line_error(cli(target, "topic", "create", "bad name!"), 1, "bad name!")


def test_produce_and_consume(
    target: Target, topic_name: Callable[..., str], tmp_path: Path
) -> None:
    name = topic_name()
    ok(cli(target, "topic", "create", name, "-p", "2"))
    lines = [f"k{i}|value {i}" for i in range(10)]
    produced = ok_json(
        cli(
            target,
            "produce",
            name,
            "-K",
            "|",
            "-H",
            "source=cli",
            "-H",
            "n=1",
            "-z",
            "gzip",
            "--acks",
            "1",
            "--format",
            "json",
            stdin="".join(line + "\n" for line in lines),
        )
    )
    assert produced["produced"] == 10 and sum(produced["partitions"].values()) == 10

    messages = [
        json.loads(line) for line in ok(cli(target, "consume", name, "-f", "json")).splitlines()
    ]
    assert sorted((m["key"], m["value"]) for m in messages) == sorted(
        tuple(line.split("|")) for line in lines
    )
    assert all(m["headers"] == [["source", "cli"], ["n", "1"]] for m in messages)
    by_partition = {p: [m["offset"] for m in messages if m["partition"] == p] for p in (0, 1)}
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())
    assert {str(p): len(o) for p, o in by_partition.items() if o} == produced["partitions"]

    # One partition, a kcat-style template, from an offset, a count.
    first = next(p for p, offsets in by_partition.items() if offsets)
    expected = sorted((m for m in messages if m["partition"] == first), key=lambda m: m["offset"])
    template = "%t|%p|%o|%k|%s|%h|%K|%S\\n"
    out = ok(cli(target, "consume", name, "-p", str(first), "-f", template))
    assert out.splitlines() == [
        f"{name}|{first}|{m['offset']}|{m['key']}|{m['value']}|source=cli,n=1|"
        f"{len(m['key'])}|{len(m['value'])}"
        for m in expected
    ]
    out = ok(cli(target, "consume", name, "-p", str(first), "-o", "-1", "-f", "%s\\n"))
    assert out.splitlines() == [expected[-1]["value"]]
    out = ok(cli(target, "consume", name, "-p", str(first), "-o", "1", "-c", "1", "-f", "%o\\n"))
    assert out.splitlines() == ["1"]
    assert ok(cli(target, "consume", name, "-o", "end")) == ""
    ts = min(m["timestamp"] for m in messages)
    assert len(ok(cli(target, "consume", name, "--timestamp", str(ts))).splitlines()) == 10
    assert ok(cli(target, "consume", name, "--timestamp", str(ts + 3_600_000))) == ""

    # From a file, without keys, with zstd: values are the lines as written.
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"line {i}\n" for i in range(100)))
    single = topic_name("file")
    ok(cli(target, "topic", "create", single))
    ok(cli(target, "produce", single, "--file", str(data), "-z", "zstd"))
    assert ok(cli(target, "consume", single)) == data.read_text()


def test_consumer_group_lag_reset_delete(target: Target, topic_name: Callable[..., str]) -> None:
    name, group = topic_name(), topic_name("group")
    ok(cli(target, "topic", "create", name))
    ok(cli(target, "produce", name, stdin="".join(f"m{i}\n" for i in range(5))))
    read = ok(cli(target, "consume", name, "--group", group, "--count", "3"))
    assert read.splitlines() == ["m0", "m1", "m2"]

    groups = ok_json(cli(target, "group", "list", "--format", "json"))
    assert {
        "group": group,
        "state": "EMPTY",
        "type": "classic",
        "protocol_type": "consumer",
    } in groups
    (described,) = ok_json(cli(target, "group", "describe", group, "--format", "json"))
    assert described["state"] == "EMPTY" and described["members"] == []
    assert [
        (o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"])
        for o in described["offsets"]
    ] == [(name, 0, 3, 5, 2)]
    assert described["total_lag"] == 2
    table = ok(cli(target, "group", "describe", group))
    assert table.splitlines()[0].endswith("total lag 2")

    dry = ok_json(
        cli(
            target,
            "group",
            "reset-offsets",
            group,
            "--topic",
            name,
            "--to-earliest",
            "--format",
            "json",
        )
    )
    assert dry["executed"] is False
    assert dry["offsets"] == [
        {"topic": name, "partition": 0, "previous_offset": 3, "new_offset": 0}
    ]
    (unchanged,) = ok_json(cli(target, "group", "describe", group, "--format", "json"))
    assert unchanged["total_lag"] == 2
    ok(
        cli(
            target, "group", "reset-offsets", group, "--all-topics", "--shift-by", "-2", "--execute"
        )
    )
    (shifted,) = ok_json(cli(target, "group", "describe", group, "--format", "json"))
    assert shifted["offsets"][0]["committed_offset"] == 1 and shifted["total_lag"] == 4
    # The group resumes from its reset commit.
    assert ok(cli(target, "consume", name, "--group", group)).splitlines() == [
        "m1",
        "m2",
        "m3",
        "m4",
    ]

    deleted = ok_json(
        cli(target, "group", "delete-offsets", group, "--topic", name, "--format", "json")
    )
    assert deleted == [{"topic": name, "partition": 0, "error": None}]
    (emptied,) = ok_json(cli(target, "group", "describe", group, "--format", "json"))
    assert emptied["offsets"] == []

    assert ok_json(cli(target, "group", "delete", group, "--format", "json")) == {
        "deleted": [group]
    }
    assert group not in [
        g["group"] for g in ok_json(cli(target, "group", "list", "--format", "json"))
    ]
    one_line_error(cli(target, "group", "describe", group), 1, group)


def test_cluster_info_and_broker_config(target: Target) -> None:
    info = ok_json(cli(target, "cluster", "info", "--format", "json"))
    host, port = target.bootstrap.rsplit(":", 1)
    assert info["cluster_id"]
    assert [(b["host"], b["port"]) for b in info["brokers"]] == [(host, int(port))]
    assert info["controller_id"] in [b["id"] for b in info["brokers"]]
    table = ok(cli(target, "cluster", "info"))
    assert (
        table.splitlines()[0] == f"Cluster {info['cluster_id']}, controller {info['controller_id']}"
    )

    broker_id = str(info["brokers"][0]["id"])
    (entry,) = ok_json(
        cli(target, "config", "get", "broker", broker_id, "num.partitions", "--format", "json")
    )
    assert entry["value"] == "1"  # compat.targets.COMMON_DEFAULTS


def test_group_with_a_live_member(target: Target, topic_name: Callable[..., str]) -> None:
    name, group = topic_name(), topic_name("group")
    ok(cli(target, "topic", "create", name, "-p", "2"))
    ok(cli(target, "produce", name, "-p", "1", stdin="a\nb\nc\n"))
    member = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "client.id": "live-member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe([name])
        deadline = time.monotonic() + 60
        while len(member.assignment()) < 2 and time.monotonic() < deadline:
            member.poll(0.1)
        assert len(member.assignment()) == 2
        (described,) = ok_json(cli(target, "group", "describe", group, "--format", "json"))
        assert described["state"] == "STABLE"
        (info,) = described["members"]
        assert info["client_id"] == "live-member"
        assert info["assignment"] == [{"topic": name, "partition": p} for p in (0, 1)]
        # Nothing committed: no lag known, but the owner of each partition is shown.
        assert [
            (o["partition"], o["committed_offset"], o["log_end_offset"], o["member_id"])
            for o in described["offsets"]
        ] == [
            (0, None, 0, info["member_id"]),
            (1, None, 3, info["member_id"]),
        ]
        one_line_error(
            cli(target, "group", "reset-offsets", group, "--all-topics", "--to-latest"),
            1,
            "must be inactive",
            "STABLE",
        )
        one_line_error(cli(target, "group", "delete", group), 1, group)
        subscribed = cli(target, "group", "delete-offsets", group, "--topic", f"{name}:0")
        assert subscribed.returncode == 1
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in subscribed.stdout, subscribed
    finally:
        member.close()


def test_partition_sizes_and_log_dirs(target: Target, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    ok(cli(target, "topic", "create", name, "-p", "2"))
    ok(cli(target, "produce", name, "-p", "1", stdin="".join(f"m{i}\n" for i in range(20))))
    (described,) = ok_json(cli(target, "topic", "describe", name, "--format", "json"))
    sizes = [p["size_bytes"] for p in described["partitions"]]
    assert sizes[0] == 0 and sizes[1] > 20 * 2  # the batch as stored, at least its values
    (log_dir,) = ok_json(cli(target, "log-dirs", "--topic", name, "--format", "json"))
    assert log_dir["error"] is None and 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert [(p["partition"], p["size_bytes"]) for p in log_dir["partitions"]] == [
        (0, 0),
        (1, sizes[1]),
    ]
