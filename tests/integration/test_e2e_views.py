"""Views (issue 18) with confluent-kafka: a view reads exactly what a client-side filter of
its source keeps, at the source's offsets, from compressed and transactional sources; groups
resume on a view; a range with no match advances the consumer; bad filters and produces to a
view are refused.

One in-process broker (EmbeddedBroker) for the module; the tests keep apart by topic names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from e2e_helpers import CLIENT_TIMEOUT, consumer, produce_all, producer, wait_until

from kafkalite.testing import EmbeddedBroker
from tests.conftest import make_topic_name

Row = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value
Headers = dict[str, str]
PARTITIONS = 2
REGIONS = ["eu", "us", "apac", None]
TAGS = ["urgent", "vip", "bulk"]


@pytest.fixture(scope="module")
def embedded() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture(scope="module")
def bootstrap(embedded: EmbeddedBroker) -> str:
    return embedded.bootstrap


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin: AdminClient, name: str, partitions: int = -1, **config: str) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, -1, config=config)])
    futures[name].result(timeout=CLIENT_TIMEOUT)


def create_view(admin: AdminClient, name: str, source: str, text: str) -> None:
    create(admin, name, **{"kafkalite.view.source": source, "kafkalite.view.filter": text})


def _message(i: int) -> tuple[dict[str, Any], Headers]:
    """A record with headers that vary along several dimensions (some missing)."""
    headers: Headers = {"n": str(i % 17)}
    region = REGIONS[i % 4]
    if region is not None:
        headers["region"] = region
    if i % 3:
        headers["tag"] = TAGS[i % 5 % 3]
    if i % 7 == 0:
        headers["price"] = f"{i % 11}.5"
    key = None if i % 13 == 0 else f"k{i % 50}"
    message = {
        "key": key,
        "value": f"v{i}",
        "partition": i % PARTITIONS,
        "headers": list(headers.items()),
    }
    return message, headers


def _fill_source(bootstrap: str, name: str, count: int) -> None:
    """`count` records, each quarter with another codec, so batches of every codec mix."""
    messages = [_message(i)[0] for i in range(count)]
    quarter = count // 4
    for n, codec in enumerate(["gzip", "snappy", "lz4", "zstd"]):
        chunk = messages[n * quarter : (n + 1) * quarter if n < 3 else count]
        produce_all(producer(bootstrap, **{"compression.type": codec}), name, chunk)


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Row]:
    """Every record of `topic` up to each partition's end, with header dicts checked later."""
    rows, _ = read_with_headers(bootstrap, topic, isolation)
    return rows


def read_with_headers(
    bootstrap: str, topic: str, isolation: str = "read_uncommitted"
) -> tuple[list[Row], list[Headers]]:
    """Every record up to each partition's end, with its headers. The end is where the
    consumer fetches next (librdkafka's statistics, `next_offset`): on a view its position
    (last record delivered + 1) stays before records the filter dropped at the end."""
    fetching: dict[int, int] = {}

    def on_stats(text: str) -> None:
        partitions = json.loads(text)["topics"].get(topic, {}).get("partitions", {})
        for index, stats in partitions.items():
            if int(index) >= 0:
                fetching[int(index)] = stats["next_offset"]

    cons = consumer(
        bootstrap,
        **{"isolation.level": isolation, "statistics.interval.ms": 50, "stats_cb": on_stats},
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = {tp.partition: cons.get_watermark_offsets(tp, CLIENT_TIMEOUT)[1] for tp in tps}
        cons.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: list[tuple[Row, Headers]] = []

        def at_end() -> bool:
            # Fetched to the end before this consume, which then found the queue empty.
            fetched = all(fetching.get(p, -1) >= end for p, end in ends.items())
            messages = cons.consume(500, 0.1)
            for message in messages:
                assert not message.error(), message.error()
                row = (message.partition(), message.offset(), message.key(), message.value())
                headers = {k: v.decode() for k, v in message.headers() or ()}
                got.append((row, headers))
            return fetched and not messages

        wait_until(at_end, timeout=30, interval=0, message=f"reading {topic} to its end")
        got.sort(key=lambda pair: pair[0][:2])
        return [row for row, _ in got], [headers for _, headers in got]
    finally:
        cons.close()


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


# Each filter with the same condition written as a client would in Python.
OPERATORS: list[tuple[str, Callable[[Headers, bytes | None], bool]]] = [
    ("region = 'eu'", lambda h, k: h.get("region") == "eu"),
    ("region <> 'eu'", lambda h, k: h.get("region") not in (None, "eu")),
    ("n < 3", lambda h, k: int(h["n"]) < 3),
    ("n <= 3", lambda h, k: int(h["n"]) <= 3),
    ("n > 14", lambda h, k: int(h["n"]) > 14),
    ("n >= 14", lambda h, k: int(h["n"]) >= 14),
    ("tag IN ('urgent', 'vip')", lambda h, k: h.get("tag") in ("urgent", "vip")),
    ("tag NOT IN ('urgent')", lambda h, k: h.get("tag") not in (None, "urgent")),
    ("price BETWEEN 2 AND 5.5", lambda h, k: 2 <= (_number(h.get("price")) or -1) <= 5.5),
    ("n NOT BETWEEN 2 AND 15", lambda h, k: not 2 <= int(h["n"]) <= 15),
    ("price IS NULL", lambda h, k: "price" not in h),
    ("region IS NOT NULL", lambda h, k: "region" in h),
    ("__key = 'k7'", lambda h, k: k == b"k7"),
    ("__key IS NULL", lambda h, k: k is None),
    (
        "region = 'eu' AND (tag = 'vip' OR n >= 10)",
        lambda h, k: h.get("region") == "eu" and (h.get("tag") == "vip" or int(h["n"]) >= 10),
    ),
    ("NOT region = 'us'", lambda h, k: h.get("region") not in (None, "us")),
    ("FALSE", lambda h, k: False),
]


@pytest.mark.parametrize("indexed", [False, True])
def test_every_operator_reads_what_a_client_side_filter_keeps(
    embedded: EmbeddedBroker, bootstrap: str, admin: AdminClient, indexed: bool
) -> None:
    """With `indexed`, the source indexes its headers: batches the filter rules out by the
    index are not read (and the answer is the same)."""
    source = make_topic_name("ops")
    index = {"kafkalite.index.headers": "region,tag,n,price"} if indexed else {}
    create(admin, source, PARTITIONS, **index)
    _fill_source(bootstrap, source, 1200)
    rows, headers = read_with_headers(bootstrap, source)
    assert len(rows) == 1200
    for n, (text, keep) in enumerate(OPERATORS):
        view = f"{source}.v{n}"
        create_view(admin, view, source, text)
        expected = [row for row, h in zip(rows, headers, strict=True) if keep(h, row[2])]
        assert read_all(bootstrap, view) == expected, text  # same offsets, keys, values
    skipped = sum(
        embedded.call(
            lambda v=v: embedded.broker.replica_manager.views.get(v).stats
        ).batches_skipped
        for v in (f"{source}.v{n}" for n in range(len(OPERATORS)))
    )
    assert (skipped > 0) is indexed


def test_transactional_source_read_committed_and_uncommitted(
    bootstrap: str, admin: AdminClient
) -> None:
    """The source indexes `region`: control batches are kept, whatever the index says."""
    source = make_topic_name("txn")
    create(admin, source, PARTITIONS, **{"kafkalite.index.headers": "region"})
    view = f"{source}.eu"
    create_view(admin, view, source, "region = 'eu'")
    txn = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": make_topic_name("tid"),
            "compression.type": "lz4",
        }
    )
    txn.init_transactions(CLIENT_TIMEOUT)
    for round_ in range(6):
        txn.begin_transaction()
        for i in range(round_ * 40, round_ * 40 + 40):
            message, _ = _message(i)
            txn.produce(source, **message)
        assert txn.flush(CLIENT_TIMEOUT) == 0  # aborted records too reach the log
        if round_ % 3 == 1:
            txn.abort_transaction(CLIENT_TIMEOUT)
        else:
            txn.commit_transaction(CLIENT_TIMEOUT)
    for isolation in ("read_committed", "read_uncommitted"):
        rows, headers = read_with_headers(bootstrap, source, isolation)
        expected = [r for r, h in zip(rows, headers, strict=True) if h.get("region") == "eu"]
        got = read_all(bootstrap, view, isolation)
        assert got == expected, isolation
    assert len(read_all(bootstrap, view, "read_committed")) == 40  # 4 committed rounds x 10
    assert len(read_all(bootstrap, view, "read_uncommitted")) == 60


def test_a_range_with_no_match_advances_the_consumer(
    embedded: EmbeddedBroker, bootstrap: str, admin: AdminClient
) -> None:
    source = make_topic_name("gap")
    create(admin, source, 1)
    view = f"{source}.eu"
    create_view(admin, view, source, "region = 'eu'")
    us = [{"value": b"x" * 100, "headers": [("region", b"us")]} for _ in range(3000)]
    produce_all(producer(bootstrap, **{"compression.type": "zstd"}), source, us)
    fetching: list[int] = []

    def on_stats(text: str) -> None:
        partition = json.loads(text)["topics"].get(view, {}).get("partitions", {}).get("0")
        if partition is not None:
            fetching.append(partition["next_offset"])

    cons = consumer(bootstrap, **{"statistics.interval.ms": 50, "stats_cb": on_stats})
    try:
        cons.assign([TopicPartition(view, 0, OFFSET_BEGINNING)])

        def advanced() -> bool:
            assert cons.poll(0.1) is None  # nothing matches
            return bool(fetching) and fetching[-1] == 3000

        wait_until(advanced, message="the fetch position to pass the records that do not match")
        # Each record was read once: the consumer does not fetch the range again.
        stats = embedded.call(lambda: embedded.broker.replica_manager.views.get(view).stats)
        assert stats.records_read == 3000 and stats.records_matched == 0
        assert stats.bytes_out < stats.bytes_in / 10  # empty batches: headers only
        hit = [{"value": b"hit", "headers": [("region", b"eu")]}]
        produce_all(producer(bootstrap), source, hit)
        message = wait_until(lambda: cons.poll(0.2), message="the matching record")
        assert (message.offset(), message.value()) == (3000, b"hit")
    finally:
        cons.close()


def test_offsets_are_the_sources(bootstrap: str, admin: AdminClient) -> None:
    source = make_topic_name("offsets")
    create(admin, source, 1)
    view = f"{source}.eu"
    create_view(admin, view, source, "region = 'eu'")
    base = 1_700_000_000_000
    messages = [
        {
            "value": b"%d" % i,
            "timestamp": base + i,
            "headers": [("region", b"eu" if i % 5 else b"us")],
        }
        for i in range(100)
    ]
    produce_all(producer(bootstrap), source, messages)
    cons = consumer(bootstrap)
    try:
        for topic in (source, view):
            assert cons.get_watermark_offsets(TopicPartition(topic, 0), CLIENT_TIMEOUT) == (0, 100)
        [found] = cons.offsets_for_times([TopicPartition(view, 0, base + 40)], CLIENT_TIMEOUT)
        assert found.offset == 40  # the source's record; the view then reads from there
        cons.assign([found])
        message = wait_until(lambda: cons.poll(0.2), message="a record after offset 40")
        assert message.offset() == 41  # 40 is "us"
    finally:
        cons.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_group_resumes_on_a_view(
    bootstrap: str, admin: AdminClient, protocol: str
) -> None:
    source = make_topic_name(f"group-{protocol}")
    create(admin, source, PARTITIONS)
    view = f"{source}.eu"
    create_view(admin, view, source, "region = 'eu'")
    eu = [
        {"value": b"a%d" % i, "partition": i % 2, "headers": [("region", b"eu")]} for i in range(20)
    ]
    us = [
        {"value": b"u%d" % i, "partition": i % 2, "headers": [("region", b"us")]} for i in range(40)
    ]
    produce_all(producer(bootstrap), source, eu + us)
    group = make_topic_name("group")
    conf: dict[str, Any] = {
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.offset.store": True,
    }
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000

    def read(count: int) -> list[bytes]:
        cons = consumer(bootstrap, **conf)
        try:
            cons.subscribe([view])
            got: list[bytes] = []

            def enough() -> bool:
                message = cons.poll(0.2)
                if message is not None and not message.error():
                    got.append(message.value())
                return len(got) >= count

            wait_until(enough, timeout=40, message=f"{count} records of the view")
            # Nothing more than expected arrives, then commit what was read.
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                message = cons.poll(0.1)
                assert message is None or message.error(), message.value()
            cons.commit(asynchronous=False)
            return got
        finally:
            cons.close()

    first = read(20)
    assert sorted(first) == sorted(m["value"] for m in eu)
    later = [
        {"value": b"b%d" % i, "partition": i % 2, "headers": [("region", b"eu")]} for i in range(6)
    ]
    produce_all(producer(bootstrap), source, later + us)
    assert sorted(read(6)) == sorted(m["value"] for m in later)


def test_bad_filters_and_produce_to_a_view_are_refused(bootstrap: str, admin: AdminClient) -> None:
    source = make_topic_name("refusals")
    create(admin, source, 1)
    with pytest.raises(KafkaException) as raised:
        create_view(admin, f"{source}.bad", source, "region = 'eu' AND tag IN ('a' 'b')")
    error = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "expected ',' or ')' in the IN list at position 31" in error.str()
    view = f"{source}.v"
    create_view(admin, view, source, "TRUE")
    [config] = admin.describe_configs([ConfigResource("topic", view)]).values()
    described = {k: v.value for k, v in config.result(timeout=CLIENT_TIMEOUT).items()}
    assert described == {"kafkalite.view.source": source, "kafkalite.view.filter": "TRUE"}
    reports: list[KafkaError | None] = []
    prod = producer(bootstrap, **{"message.timeout.ms": 20_000})
    started = time.monotonic()
    prod.produce(view, b"x", on_delivery=lambda err, msg: reports.append(err))
    assert prod.flush(CLIENT_TIMEOUT) == 0
    [failure] = reports
    assert failure is not None and failure.code() == KafkaError.TOPIC_EXCEPTION
    assert not failure.retriable()
    assert time.monotonic() - started < 10  # refused, not retried until the timeout
    futures = admin.delete_topics([source])
    with pytest.raises(KafkaException):
        futures[source].result(timeout=CLIENT_TIMEOUT)
    admin.delete_topics([view])[view].result(timeout=CLIENT_TIMEOUT)
    admin.delete_topics([source])[source].result(timeout=CLIENT_TIMEOUT)
