"""The web console's cluster layer (kafkalite/console/cluster.py) gives the same answers on
kafkalite and Apache Kafka: topics, partitions, configs, the message browser, groups with lag,
offset resets, topic creation and deletion, through confluent-kafka only."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from compat.scenario_helpers import (
    create_topic,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    topic_names,
    wait_group_coordinator,
    wait_until,
)
from compat.targets import Target
from kafkalite.console.cluster import Cluster, ClusterError

BASE = 1_700_000_000_000
COUNT = 12


@pytest.fixture
def cluster(target: Target) -> Iterator[Cluster]:
    yield Cluster(target.bootstrap, timeout=60)  # Kafka's coordinator may still be loading


def fill(target: Target, name: str) -> None:
    """COUNT JSON messages over 2 partitions, message i at BASE + i seconds, with headers."""
    create_topic(target.bootstrap, name, 2, {"retention.ms": "123456789"})
    messages = [
        {
            "key": f"user-{i}".encode(),
            "value": json.dumps({"id": i}).encode(),
            "partition": i % 2,
            "timestamp": BASE + 1000 * i,
            "headers": [("trace", f"t{i}".encode())],
        }
        for i in range(COUNT)
    ]
    produce_all(producer(target.bootstrap), name, messages)


def keys(messages: list[dict]) -> list[str]:
    return [m["key"]["text"] for m in messages]


def test_topic_partitions_and_configs(
    target: Target, cluster: Cluster, topic_name: Callable[..., str]
) -> None:
    name = topic_name()
    fill(target, name)
    row = next(t for t in cluster.topics() if t["name"] == name)
    assert (row["partitions"], row["replication"], row["messages"]) == (2, 1, COUNT)
    detail = cluster.topic(name)
    assert [(p["start"], p["end"], p["isr"]) for p in detail["partitions"]] == [
        (0, 6, [p["leader"]]) for p in detail["partitions"]
    ]
    configs = {c["name"]: c for c in detail["configs"]}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["default"]) == (
        "123456789",
        False,
    )
    assert configs["cleanup.policy"]["value"] == "delete"


def test_message_browser(target: Target, cluster: Cluster, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    fill(target, name)
    latest = cluster.messages(name, None, 3)
    assert keys(latest) == ["user-9", "user-10", "user-11"]
    assert latest[-1]["value"] == {"text": '{"id": 11}', "json": True}
    assert latest[-1]["headers"] == [["trace", {"text": "t11", "json": False}]]
    assert keys(cluster.messages(name, 1, 2, offset=4)) == ["user-9", "user-11"]
    assert keys(cluster.messages(name, None, 2, timestamp_ms=BASE + 5000)) == ["user-5", "user-6"]
    assert keys(cluster.messages(name, None, 5, contains="t1")) == ["user-1", "user-10", "user-11"]
    with pytest.raises(ClusterError) as missing:
        cluster.messages(name, 7, 1)
    assert missing.value.status == 404


def test_group_lag_and_reset(
    target: Target, cluster: Cluster, topic_name: Callable[..., str]
) -> None:
    wait_group_coordinator(target.bootstrap)
    name, group = topic_name(), topic_name("group")
    fill(target, name)
    assert cluster.reset_offsets(group, name, "offset", 2) == [
        {"topic": name, "partition": p, "committed": 2, "end": 6, "lag": 4} for p in (0, 1)
    ]
    listed = next(g for g in cluster.groups() if g["group_id"] == group)
    assert (listed["state"], listed["members"], listed["lag"]) == ("EMPTY", 0, 8)
    assert cluster.group(group)["lag"] == 8
    after = cluster.reset_offsets(group, name, "latest")
    assert [(row["committed"], row["lag"]) for row in after] == [(6, 0), (6, 0)]


def test_create_and_delete_topic(
    target: Target, cluster: Cluster, topic_name: Callable[..., str]
) -> None:
    name = topic_name()
    cluster.create_topic(name, 3, 1, {"cleanup.policy": "compact"})
    # Kafka's metadata follows CreateTopics and DeleteTopics a moment later.
    wait_until(lambda: name in topic_names(target.bootstrap), message=f"{name} listed")
    with pytest.raises(ClusterError) as again:
        cluster.create_topic(name, 3, 1, {})
    assert "TOPIC_ALREADY_EXISTS" in str(again.value)
    cluster.delete_topic(name)
    wait_until(lambda: name not in topic_names(target.bootstrap), message=f"{name} gone")
