"""Spark's `format("kafka")` on kafkalite's queue features, on a single node (one
SparkSession for the module):

- a view (issue 18): batch and streaming reads (with a checkpoint) equal a client-side filter
  of the source read with confluent-kafka, record for record (partition, offset, key, value,
  timestamp, headers);
- delayed delivery (issue 17): a batch read before a record's due time does not see it, one
  after it does, at a new offset after the records already there, with the producer's
  timestamp and headers;
- tiered storage (issue 19): a batch read from offset 0 of a topic whose early segments are
  only in S3 (gofakes3) reads every record, exactly.

The view's streaming read and the tiered read are `extended` (tests/spark/conftest.py's
EXTENDED: `make test-extended`), to keep the default run short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.process import BrokerProcess, error_records
from kafkalite.s3_server import S3Server

from .conftest import lines_since, log_mark

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# partition, offset, key, value, timestamp (ms), headers
Row = tuple[int, int, bytes | None, bytes | None, int, tuple[tuple[str, bytes], ...]]
TIMEOUT = 30.0
DELAY = "kafkalite-delay-ms"
REGIONS = ["eu", "us", "eu", "apac", None]  # None: no region header


@pytest.fixture(scope="module")
def queue_broker(module_broker_factory: Any) -> BrokerProcess:
    return module_broker_factory()  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def brokers_log_clean(module_broker_factory: Any) -> Iterator[None]:
    """The test fails if a broker of the module logged an ERROR or a traceback meanwhile
    (including brokers the test starts: read from their beginning)."""
    marks = {id(p): log_mark(p) for p in module_broker_factory.started}
    yield
    for process in module_broker_factory.started:
        errors = error_records(lines_since(process, marks.get(id(process), 0)))
        assert not errors, "kafkalite logged errors:\n" + "\n".join(errors[:5])


# -- clients ----------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int = -1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.create_topics([NewTopic(name, partitions, -1, config=config)])
    futures[name].result(timeout=TIMEOUT)
    wait_until(lambda: name in admin.list_topics(timeout=TIMEOUT).topics, f"{name} in Metadata")


def produce(bootstrap: str, topic: str, messages: Iterable[dict[str, Any]], **conf: Any) -> None:
    """Produce every message (produce() keyword arguments); fail on any delivery error."""
    failures: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for message in messages:
        producer.produce(
            topic, on_delivery=lambda err, _msg: err and failures.append(err), **message
        )
    assert producer.flush(TIMEOUT) == 0
    assert failures == []


def read_source(bootstrap: str, topic: str) -> list[Row]:
    """Every record up to the high watermarks, with confluent-kafka (assigned, no group)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "queue-features", "log_level": 0}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        rows: list[Row] = []
        deadline = time.monotonic() + TIMEOUT
        while len(rows) < sum(ends.values()):
            assert time.monotonic() < deadline, f"read {len(rows)} of {sum(ends.values())}"
            for message in consumer.consume(1000, 0.5):
                if message.error():
                    raise KafkaException(message.error())
                rows.append(
                    (
                        message.partition(),
                        message.offset(),
                        message.key(),
                        message.value(),
                        message.timestamp()[1],
                        tuple(message.headers() or ()),
                    )
                )
        return sorted(rows)
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "queue-hw", "log_level": 0})
    try:
        partitions = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1]
            for p in sorted(partitions)
        }
    finally:
        consumer.close()


def wait_until(condition: Callable[[], Any], message: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {message}"
        time.sleep(0.05)
    return value


# -- Spark ------------------------------------------------------------------------------------

COLUMNS = ["partition", "offset", "key", "value", "unix_millis(timestamp) AS ms", "headers"]


def kafka_options(bootstrap: str, topic: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "includeHeaders": "true",
    }


def spark_rows(rows: Iterable[Any]) -> list[Row]:
    return sorted(
        (
            row["partition"],
            row["offset"],
            None if row["key"] is None else bytes(row["key"]),
            None if row["value"] is None else bytes(row["value"]),
            row["ms"],
            tuple((h["key"], bytes(h["value"])) for h in row["headers"] or ()),
        )
        for row in rows
    )


def spark_batch_read(spark: Any, bootstrap: str, topic: str) -> list[Row]:
    frame = (
        spark.read.format("kafka")
        .options(**kafka_options(bootstrap, topic))
        .option("endingOffsets", "latest")
        .load()
    )
    return spark_rows(frame.selectExpr(*COLUMNS).collect())


def spark_stream_read(spark: Any, bootstrap: str, topic: str, checkpoint: Path) -> list[Row]:
    """The rows of one availableNow run of a streaming query from the checkpoint."""
    collected: list[Any] = []
    frame = spark.readStream.format("kafka").options(**kafka_options(bootstrap, topic)).load()
    query = (
        frame.selectExpr(*COLUMNS)
        .writeStream.foreachBatch(lambda batch, _id: collected.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the availableNow query did not end within 120s"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    return spark_rows(collected)


# -- views (issue 18) -------------------------------------------------------------------------


def view_messages(start: int, end: int, partitions: int) -> list[dict[str, Any]]:
    messages = []
    for i in range(start, end):
        # n: 0..599 for the first 600 records (the last 100 beyond the filter's n < 500),
        # then 100..199 again (matching).
        headers = [("n", str(i if i < 600 else i - 500).encode())]
        region = REGIONS[i % len(REGIONS)]
        if region is not None:
            headers.insert(0, ("region", region.encode()))
        messages.append(
            {
                "key": b"k%d" % i,
                "value": b"v%d" % i,
                "partition": i % partitions,
                "headers": headers,
                "timestamp": 1_735_725_600_000 + i,
            }
        )
    return messages


def view_keeps(row: Row) -> bool:
    """The view's filter, client side."""
    headers = dict(row[5])
    return headers.get("region") == b"eu" and int(headers["n"]) < 500


def make_view(bootstrap: str, topic_name: Callable[..., str]) -> tuple[str, str]:
    """A source of 3 partitions with 600 lz4 records of mixed regions (views re-encode such
    batches, with a new CRC), and a view whose filter drops every partition's last records
    (ranges with no match at the end)."""
    source, view = topic_name("orders"), topic_name("orders-eu")
    create_topic(bootstrap, source, 3)
    create_topic(
        bootstrap,
        view,
        **{"kafkalite.view.source": source, "kafkalite.view.filter": "region = 'eu' AND n < 500"},
    )
    produce(bootstrap, source, view_messages(0, 600, 3), **{"compression.type": "lz4"})
    return source, view


def test_view_batch_read_equals_client_side_filter(
    spark: Any, queue_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap = queue_broker.bootstrap
    source, view = make_view(bootstrap, topic_name)
    expected = [row for row in read_source(bootstrap, source) if view_keeps(row)]
    assert len(expected) == 200  # 2 in 5 of n < 500
    assert spark_batch_read(spark, bootstrap, view) == expected


def test_view_streaming_read_with_checkpoint_equals_client_side_filter(
    spark: Any, queue_broker: BrokerProcess, topic_name: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = queue_broker.bootstrap
    source, view = make_view(bootstrap, topic_name)
    expected = [row for row in read_source(bootstrap, source) if view_keeps(row)]
    checkpoint = tmp_path / "checkpoint"
    assert spark_stream_read(spark, bootstrap, view, checkpoint) == expected
    # More records, some matching: the query goes on from its checkpoint with those only.
    produce(bootstrap, source, view_messages(600, 700, 3), **{"compression.type": "lz4"})
    everything = [row for row in read_source(bootstrap, source) if view_keeps(row)]
    new_matches = sorted(set(everything) - set(expected))
    assert len(new_matches) == 40
    assert spark_stream_read(spark, bootstrap, view, checkpoint) == new_matches


# -- delayed delivery (issue 17) --------------------------------------------------------------

SOON_MS, LATER_MS = 3_000, 7_000


def delayed_message(i: int, delay_ms: int | None, timestamp: int) -> dict[str, Any]:
    headers = [("i", str(i).encode())]
    if delay_ms is not None:
        headers.append((DELAY, str(delay_ms).encode()))
    return {"key": b"k%d" % i, "value": b"v%d" % i, "headers": headers, "timestamp": timestamp}


def test_delayed_records_appear_in_a_batch_read_at_their_due_time(
    spark: Any, queue_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap = queue_broker.bootstrap
    topic = topic_name("reminders")
    create_topic(bootstrap, topic, 1, **{"kafkalite.delayed.delivery.enable": "true"})
    now_ms = int(time.time() * 1000)
    produce(bootstrap, topic, [delayed_message(i, None, now_ms + i) for i in range(5)])
    assert [row[1] for row in spark_batch_read(spark, bootstrap, topic)] == [0, 1, 2, 3, 4]

    # One batch: records due in SOON_MS and in LATER_MS, interleaved, and one not delayed.
    delays = [LATER_MS, SOON_MS, None, LATER_MS, SOON_MS, SOON_MS, LATER_MS]
    sent_ms = int(time.time() * 1000)
    produce(
        bootstrap,
        topic,
        [delayed_message(5 + i, d, sent_ms + i) for i, d in enumerate(delays)],
        **{"linger.ms": 100},
    )
    first = spark_batch_read(spark, bootstrap, topic)
    assert time.time() * 1000 < sent_ms + SOON_MS, "the read was not done before the due time"
    assert [(row[1], row[2]) for row in first[5:]] == [(5, b"k7")]  # the one not delayed

    def released(count: int) -> float:
        wait_until(lambda: high_watermarks(bootstrap, topic)[0] == 6 + count, f"{count} due")
        return time.time() * 1000

    # Each group becomes readable at its due time (not before: the client sent it earlier).
    assert released(3) >= sent_ms + SOON_MS
    soon = spark_batch_read(spark, bootstrap, topic)
    assert time.time() * 1000 < sent_ms + LATER_MS, "the read was not done before the due time"
    assert released(6) >= sent_ms + LATER_MS
    rows = spark_batch_read(spark, bootstrap, topic)
    assert rows[: len(soon)] == soon  # offsets stay monotonic: nothing moved

    # Offsets in due order (the order produced within one due time), each record with its
    # key, value, headers and the producer's timestamp (CreateTime).
    order = [1, 4, 5, 0, 3, 6]
    assert [row[2] for row in soon[6:]] == [b"k%d" % (5 + i) for i in order[:3]]
    assert [row[1] for row in rows] == list(range(12))
    for row, i in zip(rows[6:], order, strict=True):
        assert row[2:] == (
            b"k%d" % (5 + i),
            b"v%d" % (5 + i),
            sent_ms + i,
            (("i", str(5 + i).encode()), (DELAY, str(delays[i]).encode())),
        )


# -- tiered storage (issue 19) ----------------------------------------------------------------

TIERED_RECORDS = 300


def test_batch_read_from_offset_0_of_a_tiered_topic(
    spark: Any, module_broker_factory: Any, s3_server: S3Server, topic_name: Callable[..., str]
) -> None:
    broker = module_broker_factory(
        {**s3_server.broker_properties(100), "log.retention.check.interval.ms": "100"}
    )
    topic = topic_name("archive")
    create_topic(
        broker.bootstrap,
        topic,
        1,
        **{
            "remote.storage.enable": "true",
            "segment.bytes": "2048",
            "local.retention.bytes": "0",  # only the active segment stays local
        },
    )
    messages = [{"value": b"value-%06d" % i * 8, "partition": 0} for i in range(TIERED_RECORDS)]
    produce(broker.bootstrap, topic, messages, **{"linger.ms": 0, "batch.num.messages": 1})

    def local_bases() -> list[int]:
        return sorted(int(p.stem) for p in (broker.data_dir / f"{topic}-0").glob("*.log"))

    wait_until(lambda: len(local_bases()) == 1, "only the active segment left locally")
    assert local_bases()[0] > TIERED_RECORDS // 2  # most records are in S3 only

    rows = spark_batch_read(spark, broker.bootstrap, topic)
    assert len(rows) == TIERED_RECORDS
    assert [(row[1], row[3]) for row in rows] == [
        (i, message["value"]) for i, message in enumerate(messages)
    ]
