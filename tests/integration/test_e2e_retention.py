"""Segment roll and retention (by size and by time) move the log start offset."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from e2e_helpers import (
    consume_all,
    create_topic,
    file_size,
    low_watermark,
    produce_all,
    producer,
    segment_files,
    wait_until,
    watermarks,
)

from kafkalite.testing import BrokerProcess

SEGMENT_BYTES = 1024
CHECK_INTERVAL_MS = 200


@pytest.fixture(scope="module")
def retention_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory({"log.retention.check.interval.ms": str(CHECK_INTERVAL_MS)})


def _one_batch_per_message(bootstrap: str, topic: str, count: int, **message: object) -> None:
    prod = producer(bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(
        prod,
        topic,
        ({"value": b"%04d-" % i + b"x" * 100, "partition": 0, **message} for i in range(count)),
    )


def test_segment_roll(retention_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    create_topic(retention_broker.bootstrap, topic, 1, {"segment.bytes": str(SEGMENT_BYTES)})
    _one_batch_per_message(retention_broker.bootstrap, topic, 60)
    segments = segment_files(retention_broker.data_dir, topic, 0)
    assert len(segments) >= 4, [s.name for s in segments]
    for segment in segments:
        assert file_size(segment) <= SEGMENT_BYTES
    # Segment files are named by the base offset of their first batch, in order.
    bases = [int(s.name.removesuffix(".log")) for s in segments]
    assert bases[0] == 0 and bases == sorted(bases) and len(set(bases)) == len(bases)
    for segment in segments:
        assert segment.with_suffix(".index").exists()
        assert segment.with_suffix(".timeindex").exists()
    # Nothing is lost across segments, and nothing was deleted (no retention configured).
    consumed = consume_all(retention_broker.bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(60))
    assert watermarks(retention_broker.bootstrap, topic, 0) == (0, 60)


def test_segment_roll_survives_restart(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    broker = broker_factory()
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": str(SEGMENT_BYTES)})
    _one_batch_per_message(broker.bootstrap, topic, 40)
    before = [s.name for s in segment_files(broker.data_dir, topic, 0)]
    broker.restart()
    assert [s.name for s in segment_files(broker.data_dir, topic, 0)] == before
    consumed = consume_all(broker.bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(40))


def test_retention_by_size(retention_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    retention_bytes = 3 * SEGMENT_BYTES
    create_topic(
        retention_broker.bootstrap,
        topic,
        1,
        {"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": str(retention_bytes)},
    )
    _one_batch_per_message(retention_broker.bootstrap, topic, 100)
    bootstrap = retention_broker.bootstrap

    low = wait_until(lambda: low_watermark(bootstrap, topic), message="log start to move")
    assert 0 < low < 100

    def within_retention() -> bool:
        sizes = [file_size(s) for s in segment_files(retention_broker.data_dir, topic, 0)]
        # Kafka keeps deleting the oldest segment while the rest still exceeds the limit.
        return sum(sizes) - sizes[0] < retention_bytes

    wait_until(within_retention, message="size retention to finish")
    low, high = watermarks(bootstrap, topic, 0)
    assert high == 100
    first_segment = segment_files(retention_broker.data_dir, topic, 0)[0]
    assert int(first_segment.name.removesuffix(".log")) == low
    consumed = consume_all(bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(low, 100))
    assert consumed[-1].value.startswith(b"0099-")


def test_retention_by_time(retention_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    bootstrap = retention_broker.bootstrap
    create_topic(
        bootstrap,
        topic,
        1,
        {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "60000"},
    )
    old = int(time.time() * 1000) - 10 * 60_000  # ten minutes ago: past retention
    _one_batch_per_message(bootstrap, topic, 40, timestamp=old)
    _one_batch_per_message(bootstrap, topic, 5)  # current timestamps: kept

    low = wait_until(lambda: low_watermark(bootstrap, topic), message="time retention")
    assert 0 < low <= 40
    low, high = watermarks(bootstrap, topic, 0)
    assert high == 45
    consumed = consume_all(bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(low, 45))
    assert [c.offset for c in consumed][-5:] == list(range(40, 45))


def test_retention_by_time_deletes_everything_old(
    retention_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """When every segment is past retention, Kafka rolls a fresh segment and deletes them
    all: the log start reaches the log end and producing continues there."""
    topic = topic_name()
    bootstrap = retention_broker.bootstrap
    create_topic(bootstrap, topic, 1, {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "1000"})
    old = int(time.time() * 1000) - 3_600_000
    _one_batch_per_message(bootstrap, topic, 20, timestamp=old)
    wait_until(lambda: low_watermark(bootstrap, topic) == 20, message="all old data deleted")
    assert watermarks(bootstrap, topic, 0) == (20, 20)
    deliveries = produce_all(producer(bootstrap), topic, [{"value": b"fresh", "partition": 0}])
    assert deliveries.succeeded[0].offset == 20
    consumed = consume_all(bootstrap, topic, [0])[0]
    assert [(c.offset, c.value) for c in consumed] == [(20, b"fresh")]


def test_retention_configured_at_broker_level(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    """log.retention.bytes / log.segment.bytes on the broker apply to topics without
    overrides."""
    broker = broker_factory(
        {
            "log.retention.check.interval.ms": str(CHECK_INTERVAL_MS),
            "log.segment.bytes": str(SEGMENT_BYTES),
            "log.retention.bytes": str(2 * SEGMENT_BYTES),
        }
    )
    topic = topic_name()
    _one_batch_per_message(broker.bootstrap, topic, 60)  # auto-created
    assert len(segment_files(broker.data_dir, topic, 0)) >= 2
    low = wait_until(lambda: low_watermark(broker.bootstrap, topic), message="log start to move")
    assert 0 < low < 60


def test_everything_deleted_then_restart(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    """After retention removed every old segment, a restart keeps the log start at the log
    end (not back at 0) and producing continues there."""
    broker = broker_factory({"log.retention.check.interval.ms": str(CHECK_INTERVAL_MS)})
    topic = topic_name()
    create_topic(
        broker.bootstrap, topic, 1, {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "1000"}
    )
    _one_batch_per_message(
        broker.bootstrap, topic, 15, timestamp=int(time.time() * 1000) - 3_600_000
    )
    wait_until(lambda: low_watermark(broker.bootstrap, topic) == 15, message="all deleted")
    for restart in (broker.restart, lambda: (broker.kill(), broker.start())):
        restart()
        assert watermarks(broker.bootstrap, topic, 0) == (15, 15)
    deliveries = produce_all(producer(broker.bootstrap), topic, [{"value": b"v", "partition": 0}])
    assert deliveries.succeeded[0].offset == 15


def test_segment_roll_by_time(
    retention_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """segment.ms: Kafka's LogSegment.timeWaitedForRoll measures the incoming batch's max
    timestamp against the segment's first batch timestamp, so old-but-equal timestamps do
    not roll, and the first record more than segment.ms newer does."""
    topic = topic_name()
    bootstrap = retention_broker.bootstrap
    create_topic(bootstrap, topic, 1, {"segment.ms": "60000"})
    old = int(time.time() * 1000) - 3_600_000
    _one_batch_per_message(bootstrap, topic, 3, timestamp=old)
    assert _segment_bases(retention_broker, topic) == [0]
    _one_batch_per_message(bootstrap, topic, 3)  # an hour newer: one roll, then none
    assert _segment_bases(retention_broker, topic) == [0, 3]
    _one_batch_per_message(bootstrap, topic, 1, timestamp=old + 30_000)
    assert _segment_bases(retention_broker, topic) == [0, 3]


def _segment_bases(broker: BrokerProcess, topic: str) -> list[int]:
    return [int(s.name.removesuffix(".log")) for s in segment_files(broker.data_dir, topic, 0)]
