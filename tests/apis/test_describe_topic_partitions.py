"""DescribeTopicPartitions v0: sorted topics, partition budget, cursors, unknown names."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.apis import authorized_operations, describe_topic_partitions
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make

from .harness import call


@pytest.fixture
def topics(broker: Broker) -> Broker:
    for name, partitions in (("b", 2), ("a", 3)):
        outcome, _ = broker.admin_manager.create_topic(name, partitions)
        assert outcome.ok
    return broker


def describe(
    broker: Broker, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.DescribeTopicPartitionsRequest,
            topics=tuple(make(m.TopicRequest, name=name) for name in names),
            response_partition_limit=limit,
            cursor=cursor and make(m.Cursor, topic_name=cursor[0], partition_index=cursor[1]),
        )

    return call(broker, describe_topic_partitions.API, 0, build)


def summary(response: Any) -> tuple[list[tuple[str, str, list[int]]], tuple[str, int] | None]:
    cursor = response.next_cursor
    return (
        [
            (t.name, t.error_code.name, [p.partition_index for p in t.partitions])
            for t in response.topics
        ],
        cursor and (cursor.topic_name, cursor.partition_index),
    )


def test_named_topics_sorted_with_unknown_and_illegal_names(topics: Broker) -> None:
    response = describe(topics, ["zz", "b", "a", "bad name"])
    assert summary(response) == (
        [
            ("a", "none", [0, 1, 2]),
            ("b", "none", [0, 1]),
            ("bad name", "invalid_topic_exception", []),
            ("zz", "unknown_topic_or_partition", []),
        ],
        None,
    )
    a = response.topics[0]
    assert a.topic_id == topics.replica_manager.topics["a"].topic_id
    assert a.topic_authorized_operations == authorized_operations.TOPIC
    assert (a.partitions[0].leader_id, a.partitions[0].isr_nodes) == (0, (0,))


def test_all_topics_when_none_are_named(topics: Broker) -> None:
    assert summary(describe(topics, [])) == (
        [("a", "none", [0, 1, 2]), ("b", "none", [0, 1])],
        None,
    )


@pytest.mark.parametrize(
    ("limit", "cursor", "expected"),
    [
        (2, None, ([("a", "none", [0, 1])], ("a", 2))),
        (3, None, ([("a", "none", [0, 1, 2])], ("b", 0))),
        (2, ("a", 2), ([("a", "none", [2]), ("b", "none", [0])], ("b", 1))),
        (0, None, ([("a", "none", [0])], ("a", 1))),  # at least one partition
        (-3, ("b", 1), ([("b", "none", [1])], None)),
    ],
)
def test_pages(topics: Broker, limit: int, cursor: Any, expected: Any) -> None:
    assert summary(describe(topics, ["a", "b"], limit, cursor)) == expected


def test_a_cursor_outside_the_named_topics_is_an_invalid_request(topics: Broker) -> None:
    response = describe(topics, ["b"], 10, ("a", 1))
    assert summary(response) == ([("b", "invalid_request", [])], None)
