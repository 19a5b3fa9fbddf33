"""Errors of bad requests as clients observe them, compared by name on kafkalite and Apache
Kafka: unknown topics (auto-creation per request), invalid topic names, existing topics,
replication factors, config values, partition counts, out-of-range offsets (committed and
fetched), a topic deleted under a consumer, and records the broker refuses."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from compat.scenario_helpers import (
    CLIENT_TIMEOUT,
    admin,
    consumer,
    create_topic,
    error_name,
    first_error,
    produce,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    topic_names,
    wait_until,
    watermarks,
)


def _poll_error(cons: Consumer, timeout: float = 20.0) -> KafkaError:
    """The first error poll() hands over (AssertionError on a message or on silence)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = cons.poll(0.2)
        if message is None:
            continue
        assert message.error() is not None, f"consumed offset {message.offset()} instead"
        return message.error()
    raise AssertionError(f"no error within {timeout}s")


def _fill(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    produce_all(
        producer(bootstrap),
        topic,
        ({"value": b"v%d" % i, "partition": i % partitions} for i in range(count)),
    )


# -- unknown topics and auto-creation --------------------------------------------------------


def test_producer_auto_creates_a_topic_by_default(target, topic_name: Callable[..., str]) -> None:
    """Metadata with allow_auto_topic_creation (the producer's default) creates the topic
    with num.partitions partitions (1 on both targets)."""
    topic = topic_name()
    deliveries = produce_all(producer(target.bootstrap), topic, [{"value": b"hello"}])
    assert [(d.partition, d.offset) for d in deliveries.succeeded] == [(0, 0)]
    assert topic in topic_names(target.bootstrap)
    assert len(admin(target.bootstrap).list_topics(topic).topics[topic].partitions) == 1


def test_producer_without_auto_create_gets_unknown_topic(
    target, topic_name: Callable[..., str]
) -> None:
    """allow.auto.create.topics=false on the producer: the broker must not create the topic
    (Metadata allow_auto_topic_creation=false); the message fails."""
    topic = topic_name()
    prod = producer(
        target.bootstrap,
        **{
            "allow.auto.create.topics": False,
            "topic.metadata.propagation.max.ms": 1000,
            "message.timeout.ms": 5000,
        },
    )
    deliveries = produce(prod, topic, [{"value": b"nowhere"}])
    assert [d.error.name() if d.error else None for d in deliveries.reports] == [
        "UNKNOWN_TOPIC_OR_PART"
    ]
    assert topic not in topic_names(target.bootstrap)


def test_subscriber_does_not_create_an_unknown_topic(
    target, topic_name: Callable[..., str]
) -> None:
    """A consumer (allow.auto.create.topics=false, librdkafka's consumer default) subscribed
    to a missing topic gets UNKNOWN_TOPIC_OR_PART, and the topic stays missing."""
    topic, group = topic_name(), topic_name("group")
    cons = consumer(target.bootstrap, **{"group.id": group, "session.timeout.ms": 6000})
    try:
        cons.subscribe([topic])
        assert _poll_error(cons).name() == "UNKNOWN_TOPIC_OR_PART"
    finally:
        cons.close()
    assert topic not in topic_names(target.bootstrap)


# -- topic names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["bad name", "a/b", "topic!", "..", ".", "x" * 250], ids=lambda n: n[:12]
)
def test_create_topic_invalid_name(target, name: str) -> None:
    futures = admin(target.bootstrap).create_topics([NewTopic(name, 1, 1)])
    assert error_name(futures[name]) == "TOPIC_EXCEPTION"
    assert name not in topic_names(target.bootstrap)


def test_create_topic_longest_legal_name(target, topic_name: Callable[..., str]) -> None:
    name = (topic_name() + "x" * 249)[:249]
    create_topic(target.bootstrap, name, 1)
    assert name in topic_names(target.bootstrap)


def test_create_topic_colliding_name(target, topic_name: Callable[..., str]) -> None:
    """'.' and '_' collide in metric names: Kafka refuses a.b when a_b exists."""
    base = topic_name().replace(".", "-").replace("_", "-")
    create_topic(target.bootstrap, f"{base}_x", 1)
    futures = admin(target.bootstrap).create_topics([NewTopic(f"{base}.x", 1, 1)])
    assert error_name(futures[f"{base}.x"]) == "TOPIC_EXCEPTION"
    assert f"{base}.x" not in topic_names(target.bootstrap)


def test_produce_to_invalid_topic_name(target) -> None:
    prod = producer(target.bootstrap, **{"message.timeout.ms": 5000})
    deliveries = produce(prod, "bad topic name!", [{"value": b"x"}])
    assert [d.error.name() if d.error else None for d in deliveries.reports] == ["TOPIC_EXCEPTION"]


# -- CreateTopics / CreatePartitions / configs -----------------------------------------------


def test_create_existing_topic(target, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    futures = admin(target.bootstrap).create_topics([NewTopic(topic, 3, 1)])
    assert error_name(futures[topic]) == "TOPIC_ALREADY_EXISTS"
    assert len(admin(target.bootstrap).list_topics(topic).topics[topic].partitions) == 1


@pytest.mark.parametrize(
    ("partitions", "replication", "config", "expected"),
    [
        (0, 1, {}, "INVALID_PARTITIONS"),
        (1, 3, {}, "INVALID_REPLICATION_FACTOR"),
        (1, 0, {}, "INVALID_REPLICATION_FACTOR"),
        (1, 1, {"no.such.config": "1"}, "INVALID_CONFIG"),
        (1, 1, {"retention.ms": "abc"}, "INVALID_CONFIG"),
        (1, 1, {"cleanup.policy": "shred"}, "INVALID_CONFIG"),
        (1, 1, {"compression.type": "brotli"}, "INVALID_CONFIG"),
        (1, 1, {"max.message.bytes": "-5"}, "INVALID_CONFIG"),
        (1, 1, {"min.insync.replicas": "0"}, "INVALID_CONFIG"),
    ],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_create_topic_invalid_arguments(
    target,
    topic_name: Callable[..., str],
    partitions: int,
    replication: int,
    config: dict[str, str],
    expected: str,
) -> None:
    topic = topic_name()
    futures = admin(target.bootstrap).create_topics(
        [NewTopic(topic, partitions, replication, config=config)]
    )
    assert error_name(futures[topic]) == expected
    assert topic not in topic_names(target.bootstrap)


def test_create_partitions_errors(target, topic_name: Callable[..., str]) -> None:
    topic, missing = topic_name(), topic_name("missing")
    create_topic(target.bootstrap, topic, 2)
    client = admin(target.bootstrap)
    got = {}
    for label, name, count in (
        ("same", topic, 2),
        ("fewer", topic, 1),
        ("unknown topic", missing, 3),
    ):
        got[label] = error_name(client.create_partitions([NewPartitions(name, count)])[name])
    assert got == {
        "same": "INVALID_PARTITIONS",
        "fewer": "INVALID_PARTITIONS",
        "unknown topic": "UNKNOWN_TOPIC_OR_PART",
    }
    assert len(client.list_topics(topic).topics[topic].partitions) == 2


def test_config_errors(target, topic_name: Callable[..., str]) -> None:
    topic, missing = topic_name(), topic_name("missing")
    create_topic(target.bootstrap, topic, 1)
    client = admin(target.bootstrap)

    def alter(name: str, key: str, value: str) -> str:
        resource = ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        return error_name(client.incremental_alter_configs([resource])[resource])

    missing_resource = ConfigResource(ResourceType.TOPIC, missing)
    got = {
        "bad value": alter(topic, "retention.ms", "soon"),
        "unknown name": alter(topic, "no.such.config", "1"),
        "bad enum": alter(topic, "cleanup.policy", "shred"),
        "unknown topic": alter(missing, "retention.ms", "1000"),
        "describe unknown topic": error_name(
            client.describe_configs([missing_resource])[missing_resource]
        ),
        "delete unknown topic": error_name(client.delete_topics([missing])[missing]),
    }
    assert got == {
        "bad value": "INVALID_CONFIG",
        "unknown name": "INVALID_CONFIG",
        "bad enum": "INVALID_CONFIG",
        "unknown topic": "UNKNOWN_TOPIC_OR_PART",
        "describe unknown topic": "UNKNOWN_TOPIC_OR_PART",
        "delete unknown topic": "UNKNOWN_TOPIC_OR_PART",
    }


def test_delete_records_out_of_range(target, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    _fill(target.bootstrap, topic, 5)
    tp = TopicPartition(topic, 0, 6)
    assert error_name(admin(target.bootstrap).delete_records([tp])[tp]) == "OFFSET_OUT_OF_RANGE"
    assert watermarks(target.bootstrap, topic, 0) == (0, 5)


# -- records the broker refuses --------------------------------------------------------------


def _stamp_errors(bootstrap: str, topic: str, offsets_ms: dict[str, int]) -> dict:
    now = int(time.time() * 1000)
    prod = producer(bootstrap, **{"linger.ms": 0})
    results = {}
    for label, delta in offsets_ms.items():
        (report,) = produce(prod, topic, [{"value": b"x", "timestamp": now + delta}]).reports
        results[label] = report.error.name() if report.error else None
    return results


def test_timestamp_too_far_in_the_future_broker_default(
    target, topic_name: Callable[..., str]
) -> None:
    """log.message.timestamp.after.max.ms (Kafka 4 default: one hour) refuses CreateTime
    stamps further ahead with INVALID_TIMESTAMP; the past is unlimited by default."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    got = _stamp_errors(
        target.bootstrap,
        topic,
        {"a year back": -365 * 86_400_000, "a minute ahead": 60_000, "2 h ahead": 7_200_000},
    )
    assert got == {"a year back": None, "a minute ahead": None, "2 h ahead": "INVALID_TIMESTAMP"}


def test_timestamp_outside_the_topic_limits(target, topic_name: Callable[..., str]) -> None:
    """message.timestamp.before.max.ms / after.max.ms set on the topic."""
    topic = topic_name()
    create_topic(
        target.bootstrap,
        topic,
        1,
        config={
            "message.timestamp.before.max.ms": "7200000",
            "message.timestamp.after.max.ms": "300000",
        },
    )
    got = _stamp_errors(
        target.bootstrap,
        topic,
        {
            "1 h back": -3_600_000,
            "3 h back": -3 * 3_600_000,
            "1 min ahead": 60_000,
            "10 min ahead": 600_000,
        },
    )
    assert got == {
        "1 h back": None,
        "3 h back": "INVALID_TIMESTAMP",
        "1 min ahead": None,
        "10 min ahead": "INVALID_TIMESTAMP",
    }


def test_compacted_topic_refuses_records_without_a_key(
    target, topic_name: Callable[..., str]
) -> None:
    """cleanup.policy=compact: a record without a key is INVALID_RECORD (tombstones with a
    key are fine)."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
    prod = producer(target.bootstrap, **{"linger.ms": 0})
    got = {
        "keyed": produce(prod, topic, [{"key": b"k", "value": b"v"}]).reports,
        "no key": produce(prod, topic, [{"value": b"v"}]).reports,
        "keyed tombstone": produce(prod, topic, [{"key": b"k", "value": None}]).reports,
    }
    assert {
        label: [r.error.name() if r.error else None for r in reports]
        for label, reports in got.items()
    } == {
        "keyed": [None],
        "no key": ["INVALID_RECORD"],
        "keyed tombstone": [None],
    }
    assert watermarks(target.bootstrap, topic, 0) == (0, 2)


def test_keyless_records_in_a_batch_are_named_by_index(
    target, topic_name: Callable[..., str]
) -> None:
    """KIP-467: one batch of 100 records to a compacted topic, every tenth without a key.
    The broker names the 10 keyless records (record_errors by batch index); librdkafka fails
    those with INVALID_RECORD and the 90 others as collateral (_INVALID_DIFFERENT_RECORD)."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
    # One batch: a long linger, flushed at once; no retries of the collateral records.
    prod = producer(target.bootstrap, **{"linger.ms": 5000, "batch.num.messages": 1000})
    messages = [
        {"value": b"v%d" % i, "partition": 0, **({} if i % 10 == 3 else {"key": b"k%d" % i})}
        for i in range(100)
    ]
    reports = produce(prod, topic, messages).reports
    names = [r.error.name() if r.error else None for r in reports]
    assert Counter(names) == {"INVALID_RECORD": 10, "_INVALID_DIFFERENT_RECORD": 90}
    keyless = sorted(int(r.value[1:]) for r in reports if r.error.name() == "INVALID_RECORD")
    assert keyless == list(range(3, 100, 10))
    assert watermarks(target.bootstrap, topic, 0) == (0, 0)


def test_produce_with_invalid_acks(target, topic_name: Callable[..., str]) -> None:
    """acks must be -1, 0 or 1."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    prod = producer(target.bootstrap, **{"acks": 2, "message.timeout.ms": 5000})
    reports = produce(prod, topic, [{"value": b"v"}]).reports
    assert [r.error.name() if r.error else None for r in reports] == ["INVALID_REQUIRED_ACKS"]
    assert watermarks(target.bootstrap, topic, 0) == (0, 0)


# -- out-of-range offsets --------------------------------------------------------------------


@pytest.mark.parametrize("where", ["past the end", "before the start"])
def test_fetch_out_of_range_with_reset_error(
    target, topic_name: Callable[..., str], where: str
) -> None:
    """auto.offset.reset=error: a fetch position outside [log start, high watermark] is an
    _AUTO_OFFSET_RESET error (the broker answered OFFSET_OUT_OF_RANGE)."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    _fill(target.bootstrap, topic, 10)
    offset = 50
    if where == "before the start":
        deleted = TopicPartition(topic, 0, 5)
        admin(target.bootstrap).delete_records([deleted])[deleted].result(CLIENT_TIMEOUT)
        offset = 2
    error, _ = first_error(target.bootstrap, topic, 0, offset, **{"auto.offset.reset": "error"})
    assert error is not None and error.name() == "_AUTO_OFFSET_RESET"
    # With earliest, the same position resets to the log start.
    error, first = first_error(
        target.bootstrap, topic, 0, offset, **{"auto.offset.reset": "earliest"}
    )
    assert (error, first) == (None, [5 if where == "before the start" else 0])


def _commit(cons: Consumer, offsets: list[TopicPartition]) -> str | None:
    """Error name of a synchronous commit (None: committed). librdkafka raises the first
    failed partition's error for the whole call."""
    try:
        result = cons.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        return exc.args[0].name()
    errors = [tp.error.name() for tp in result if tp.error]
    return errors[0] if errors else None


def test_commit_errors_and_out_of_range_commits(target, topic_name: Callable[..., str]) -> None:
    """Commits are not range-checked (an offset past the end is stored as is), but unknown
    partitions and oversized metadata are refused; a member resuming from a committed
    offset past the end hits the reset policy."""
    topic, missing, group = topic_name(), topic_name("missing"), topic_name("group")
    create_topic(target.bootstrap, topic, 1)
    _fill(target.bootstrap, topic, 10)
    cons = consumer(target.bootstrap, **{"group.id": group})
    try:
        got = {
            "past the end": _commit(cons, [TopicPartition(topic, 0, 1000)]),
            "unknown topic": _commit(cons, [TopicPartition(missing, 0, 1)]),
            "unknown partition": _commit(cons, [TopicPartition(topic, 5, 1)]),
            "metadata too large": _commit(cons, [TopicPartition(topic, 0, 3, "m" * 5000)]),
        }
        assert got == {
            "past the end": None,
            "unknown topic": "UNKNOWN_TOPIC_OR_PART",
            "unknown partition": "UNKNOWN_TOPIC_OR_PART",
            "metadata too large": "OFFSET_METADATA_TOO_LARGE",
        }
        (committed,) = cons.committed([TopicPartition(topic, 0)], timeout=CLIENT_TIMEOUT)
        assert committed.offset == 1000
    finally:
        cons.close()
    assert missing not in topic_names(target.bootstrap)

    member = consumer(
        target.bootstrap,
        **{"group.id": group, "auto.offset.reset": "error", "session.timeout.ms": 6000},
    )
    try:
        member.subscribe([topic])
        assert _poll_error(member).name() == "_AUTO_OFFSET_RESET"
    finally:
        member.close()


# -- a topic deleted under a consumer --------------------------------------------------------


def test_consume_from_a_deleted_topic(target, topic_name: Callable[..., str]) -> None:
    """A subscriber whose topic is deleted: UNKNOWN_TOPIC_OR_PART from poll() and its
    partitions revoked; a producer that may not auto-create cannot write there either."""
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 1)
    _fill(target.bootstrap, topic, 5)
    revoked: list[list[int]] = []
    cons = consumer(
        target.bootstrap,
        **{
            "group.id": group,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 500,
        },
    )
    try:
        cons.subscribe(
            [topic], on_revoke=lambda _, parts: revoked.append([p.partition for p in parts])
        )
        seen: list[int] = []
        wait_until(lambda: _collect(cons, seen) >= 5, message="the five messages")
        assert seen == [0, 1, 2, 3, 4]
        admin(target.bootstrap).delete_topics([topic])[topic].result(CLIENT_TIMEOUT)
        assert _poll_error(cons).name() == "UNKNOWN_TOPIC_OR_PART"
        wait_until(lambda: cons.poll(0.2) is None and revoked, message="a revocation")
        assert revoked == [[0]]
        assert cons.assignment() == []
    finally:
        cons.close()
    assert topic not in topic_names(target.bootstrap)
    # A producer that may not auto-create gets nothing written either.
    prod = producer(
        target.bootstrap,
        **{
            "allow.auto.create.topics": False,
            "topic.metadata.propagation.max.ms": 1000,
            "message.timeout.ms": 5000,
        },
    )
    reports = produce(prod, topic, [{"value": b"late"}]).reports
    assert [r.error.name() if r.error else None for r in reports] == ["UNKNOWN_TOPIC_OR_PART"]


def _collect(cons: Consumer, seen: list[int]) -> int:
    message = cons.poll(0.2)
    if message is not None:
        if message.error():
            raise KafkaException(message.error())
        seen.append(message.offset())
    return len(seen)
