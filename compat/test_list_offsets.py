"""ListOffsets as clients see it, the same on kafkalite and Apache Kafka: watermarks,
Consumer.offsets_for_times, AdminClient.list_offsets (earliest, latest, max_timestamp,
for_timestamp, read_committed), empty partitions, timestamps past the last record, and the
earliest offset after DeleteRecords."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from compat.scenario_helpers import (
    CLIENT_TIMEOUT,
    admin,
    consume_all,
    create_topic,
    offsets_for_times,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    watermarks,
)

BASE = 1_700_000_000_000
# Offset i has timestamp STAMPS[i]: increasing, except offset 6 holds the maximum (so "first
# offset with a timestamp >= t" and "max timestamp" differ) and offsets 2 and 3 share one.
STAMPS = [BASE + 1000 * i for i in range(10)]
STAMPS[3] = STAMPS[2]
STAMPS[6] = BASE + 50_000
COUNT = len(STAMPS)

# (target timestamp, first offset with a timestamp >= it; -1: none)
BY_TIMESTAMP = [
    (BASE - 5000, 0),  # before everything
    (BASE, 0),  # exact
    (BASE + 1, 1),
    (BASE + 2000, 2),  # two records with that timestamp: the first
    (BASE + 2001, 4),
    (BASE + 5000, 5),
    (BASE + 5001, 6),  # offset 6 (BASE + 50 s) is the first at or after it
    (BASE + 9000, 6),
    (BASE + 50_000, 6),
    (BASE + 50_001, -1),  # after everything
]

# layout -> producer settings: one batch per record, one batch, one compressed batch.
LAYOUTS: dict[str, dict[str, Any]] = {
    "separate": {"linger.ms": 0},
    "batched": {"linger.ms": 500},
    "compressed": {"linger.ms": 500, "compression.type": "gzip"},
}


@pytest.fixture(scope="module")
def timed_topics(target) -> dict[str, str]:
    """layout -> a topic with two partitions: STAMPS on partition 0, partition 1 empty."""
    names = {}
    for layout, conf in LAYOUTS.items():
        name = f"list-offsets-{layout}-{uuid.uuid4().hex[:10]}"
        create_topic(target.bootstrap, name, 2)
        prod = producer(target.bootstrap, **conf)
        messages = [
            {"value": b"v%d " % i * 20, "timestamp": ts, "partition": 0}
            for i, ts in enumerate(STAMPS)
        ]
        if layout == "separate":
            for message in messages:
                produce_all(prod, name, [message])
        else:
            produce_all(prod, name, messages)
        names[layout] = name
    return names


def _list_offsets(bootstrap: str, tp: TopicPartition, spec: OffsetSpec, **kwargs: Any) -> Any:
    futures = admin(bootstrap).list_offsets({tp: spec}, request_timeout=10, **kwargs)
    return futures[TopicPartition(tp.topic, tp.partition)].result(timeout=CLIENT_TIMEOUT)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_watermarks(target, timed_topics: dict[str, str], layout: str) -> None:
    topic = timed_topics[layout]
    assert watermarks(target.bootstrap, topic, 0) == (0, COUNT)
    assert watermarks(target.bootstrap, topic, 1) == (0, 0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def testoffsets_for_times(target, timed_topics: dict[str, str], layout: str) -> None:
    """The first offset whose timestamp is at or after the target; -1 (OFFSET_END) past the
    last record."""
    stamps = [ts for ts, _ in BY_TIMESTAMP]
    found = offsets_for_times(target.bootstrap, timed_topics[layout], stamps)
    assert dict(zip(stamps, found, strict=True)) == dict(BY_TIMESTAMP)


def test_offsets_for_times_empty_partition(target, timed_topics: dict[str, str]) -> None:
    topic = timed_topics["separate"]
    assert offsets_for_times(target.bootstrap, topic, [BASE - 1, BASE + 1], partition=1) == [
        -1,
        -1,
    ]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_admin_list_offsets(target, timed_topics: dict[str, str], layout: str) -> None:
    """(offset, timestamp) per spec: earliest and latest carry no timestamp (-1),
    max_timestamp the record holding the largest one, for_timestamp the record found."""
    tp = TopicPartition(timed_topics[layout], 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "for_timestamp": OffsetSpec.for_timestamp(BASE + 2500),
        "for_timestamp_first_of_equal": OffsetSpec.for_timestamp(BASE + 1500),
        "for_timestamp_after_all": OffsetSpec.for_timestamp(BASE + 60_000),
    }
    got = {}
    for label, spec in specs.items():
        info = _list_offsets(target.bootstrap, tp, spec)
        got[label] = (info.offset, info.timestamp)
    assert got == {
        "earliest": (0, -1),
        "latest": (COUNT, -1),
        "max_timestamp": (6, BASE + 50_000),
        "for_timestamp": (4, BASE + 4000),
        "for_timestamp_first_of_equal": (2, BASE + 2000),
        "for_timestamp_after_all": (-1, -1),
    }


def test_admin_list_offsets_read_committed(target, timed_topics: dict[str, str]) -> None:
    """Without transactions the last stable offset is the high watermark."""
    tp = TopicPartition(timed_topics["batched"], 0)
    committed = _list_offsets(
        target.bootstrap, tp, OffsetSpec.latest(), isolation_level=IsolationLevel.READ_COMMITTED
    )
    uncommitted = _list_offsets(
        target.bootstrap,
        tp,
        OffsetSpec.latest(),
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
    )
    assert (committed.offset, uncommitted.offset) == (COUNT, COUNT)


def test_admin_list_offsets_empty_partition(target, timed_topics: dict[str, str]) -> None:
    tp = TopicPartition(timed_topics["separate"], 1)
    got = {
        label: (info.offset, info.timestamp)
        for label, info in (
            ("earliest", _list_offsets(target.bootstrap, tp, OffsetSpec.earliest())),
            ("latest", _list_offsets(target.bootstrap, tp, OffsetSpec.latest())),
            ("max_timestamp", _list_offsets(target.bootstrap, tp, OffsetSpec.max_timestamp())),
            ("for_timestamp", _list_offsets(target.bootstrap, tp, OffsetSpec.for_timestamp(BASE))),
        )
    }
    assert got == {
        "earliest": (0, -1),
        "latest": (0, -1),
        "max_timestamp": (-1, -1),
        "for_timestamp": (-1, -1),
    }


def test_earliest_after_delete_records(target, topic_name: Callable[..., str]) -> None:
    """DeleteRecords moves the log start offset: the low watermark, earliest, timestamp
    lookups and a consumer starting at the beginning all follow it."""
    topic = topic_name()
    bootstrap = target.bootstrap
    create_topic(bootstrap, topic, 1)
    produce_all(
        producer(bootstrap, **{"linger.ms": 0}),
        topic,
        ({"value": b"v%d" % i, "timestamp": ts, "partition": 0} for i, ts in enumerate(STAMPS)),
    )
    tp = TopicPartition(topic, 0)
    client = admin(bootstrap)
    deleted = client.delete_records([TopicPartition(topic, 0, 4)])
    result = deleted[TopicPartition(topic, 0, 4)].result(timeout=CLIENT_TIMEOUT)
    assert result.low_watermark == 4

    assert watermarks(bootstrap, topic, 0) == (4, COUNT)
    assert _list_offsets(bootstrap, tp, OffsetSpec.earliest()).offset == 4
    assert _list_offsets(bootstrap, tp, OffsetSpec.latest()).offset == COUNT
    # Timestamp lookups never answer below the log start offset.
    assert offsets_for_times(bootstrap, topic, [BASE - 5000, BASE + 1000, BASE + 5000]) == [
        4,
        4,
        5,
    ]
    consumed = consume_all(bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(4, COUNT))
    assert consumed[0].value == b"v4"

    # Everything deleted: the partition is empty from offset COUNT on.
    deleted = client.delete_records([TopicPartition(topic, 0, -1)])  # -1: the high watermark
    assert deleted[TopicPartition(topic, 0, -1)].result(CLIENT_TIMEOUT).low_watermark == COUNT
    assert watermarks(bootstrap, topic, 0) == (COUNT, COUNT)
    assert _list_offsets(bootstrap, tp, OffsetSpec.earliest()).offset == COUNT
    assert offsets_for_times(bootstrap, topic, [BASE - 5000, BASE + 50_000]) == [-1, -1]
    # MAX_TIMESTAMP still names the deleted record with the largest timestamp: Kafka answers
    # from its segments' max-timestamp cache, below the log start offset (so does kafkalite).
    info = _list_offsets(bootstrap, tp, OffsetSpec.max_timestamp())
    assert (info.offset, info.timestamp) == (6, BASE + 50_000)


def test_latest_and_timestamps_follow_appends(target, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    bootstrap = target.bootstrap
    create_topic(bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    prod = producer(bootstrap)
    for round_ in range(3):
        produce_all(
            prod,
            topic,
            ({"value": b"x", "timestamp": BASE + round_ * 100 + i} for i in range(5)),
        )
        assert _list_offsets(bootstrap, tp, OffsetSpec.latest()).offset == 5 * (round_ + 1)
        assert offsets_for_times(bootstrap, topic, [BASE + round_ * 100 + 2]) == [5 * round_ + 2]
        info = _list_offsets(bootstrap, tp, OffsetSpec.max_timestamp())
        assert (info.offset, info.timestamp) == (5 * round_ + 4, BASE + round_ * 100 + 4)
