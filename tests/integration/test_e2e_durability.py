"""Durability across restarts: clean restart, kill -9 with no acknowledged loss, and torn
segment tails (garbage appended, last batch half-written) that recovery truncates."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from e2e_helpers import (
    Deliveries,
    batch_positions,
    consume_all,
    consumer,
    create_topic,
    file_size,
    produce_all,
    producer,
    segment_files,
    wait_until,
    watermarks,
)

from kafkalite.testing import BrokerProcess

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"


def _values(consumed: list) -> list[bytes | None]:
    return [c.value for c in consumed]


def test_restart_keeps_data_and_offsets_continue(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 2, config={"retention.ms": "-1"})
    first = [{"value": b"before-%d" % i, "key": b"k%d" % i, "partition": i % 2} for i in range(40)]
    produce_all(producer(broker.bootstrap), topic, first)

    assert broker.stop() == 0
    assert (broker.data_dir / CLEAN_SHUTDOWN).exists()
    broker.start()

    consumed = consume_all(broker.bootstrap, topic, [0, 1])
    for partition in (0, 1):
        assert _values(consumed[partition]) == [
            m["value"] for m in first if m["partition"] == partition
        ]
    assert watermarks(broker.bootstrap, topic, 0) == (0, 20)

    second = [{"value": b"after-%d" % i, "partition": i % 2} for i in range(10)]
    deliveries = produce_all(producer(broker.bootstrap), topic, second)
    assert sorted(d.offset for d in deliveries.succeeded if d.partition == 0) == list(range(20, 25))
    consumed = consume_all(broker.bootstrap, topic, [0, 1])
    assert [c.offset for c in consumed[0]] == list(range(25))
    assert _values(consumed[1])[-5:] == [b"after-%d" % i for i in range(1, 10, 2)]

    # A second restart changes nothing.
    broker.restart()
    assert watermarks(broker.bootstrap, topic, 1) == (0, 25)


def test_kill_9_loses_no_acknowledged_message(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    partitions = 3
    create_topic(broker.bootstrap, topic, partitions)
    total = 20_000
    deliveries = Deliveries()
    prod = producer(
        broker.bootstrap,
        **{
            "acks": "all",
            "linger.ms": 2,
            "batch.num.messages": 200,
            "message.timeout.ms": 10_000,
            "retries": 0,
        },
    )
    for i in range(total):
        while True:
            try:
                prod.produce(
                    topic,
                    value=b"m-%06d" % i,
                    partition=i % partitions,
                    on_delivery=deliveries.callback,
                )
                break
            except BufferError:
                prod.poll(0.05)
        prod.poll(0)
        if len(deliveries.succeeded) >= total // 4:
            break  # kill mid-stream, with produce requests in flight

    def quarter_acked() -> bool:
        prod.poll(0.05)
        return len(deliveries.succeeded) >= total // 4

    wait_until(quarter_acked, message="a quarter of the messages acknowledged")

    broker.kill()
    assert not (broker.data_dir / CLEAN_SHUTDOWN).exists()
    prod.purge()
    prod.flush(0)
    prod.poll(0)
    acked = {(d.partition, d.offset): d.value for d in deliveries.succeeded}
    assert acked

    broker.start()
    consumed = consume_all(broker.bootstrap, topic, range(partitions))
    stored = {(c.partition, c.offset): c.value for p in consumed for c in consumed[p]}
    missing = {k: v for k, v in acked.items() if stored.get(k) != v}
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages lost or changed"
    for partition in range(partitions):
        offsets = [c.offset for c in consumed[partition]]
        assert offsets == list(range(len(offsets))), "offsets not contiguous after recovery"

    # And the partition keeps going where the recovered log ends.
    ends = {p: watermarks(broker.bootstrap, topic, p)[1] for p in range(partitions)}
    more = produce_all(producer(broker.bootstrap), topic, [{"value": b"x", "partition": 0}])
    assert more.succeeded[0].offset == ends[0]


def _fill_in_batches(bootstrap: str, topic: str, count: int) -> None:
    """`count` single-message batches in partition 0 (flush after each)."""
    prod = producer(bootstrap, **{"linger.ms": 0})
    for i in range(count):
        produce_all(prod, topic, [{"value": b"msg-%03d" % i, "key": b"k", "partition": 0}])


def _ten_batches_then(
    broker: BrokerProcess, topic_name: Callable[..., str], stop: Callable[[], object]
) -> tuple[str, Path]:
    """A new topic with ten single-message batches, then `stop` (the broker's stop or
    kill): the topic and its active segment."""
    topic = topic_name()
    create_topic(broker.bootstrap, topic, 1)
    _fill_in_batches(broker.bootstrap, topic, 10)
    stop()
    return topic, segment_files(broker.data_dir, topic, 0)[-1]


def _check_recovered(broker: BrokerProcess, topic: str, expected: int) -> None:
    assert watermarks(broker.bootstrap, topic, 0) == (0, expected)
    consumed = consume_all(broker.bootstrap, topic, [0])[0]
    assert _values(consumed) == [b"msg-%03d" % i for i in range(expected)]
    produced = produce_all(producer(broker.bootstrap), topic, [{"value": b"new", "partition": 0}])
    assert produced.succeeded[0].offset == expected
    consumed = consume_all(broker.bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(expected + 1))
    assert consumed[-1].value == b"new"


def _append_garbage(path: Path, garbage: bytes) -> None:
    with open(path, "ab") as f:
        f.write(garbage)
        f.flush()
        os.fsync(f.fileno())


GARBAGE = {
    "random": bytes((i * 73 + 19) % 256 for i in range(300)),
    "zeros": b"\x00" * 4096,
    "fake-header": (  # a plausible batch header claiming a huge length
        (10).to_bytes(8, "big")
        + (50_000).to_bytes(4, "big")
        + b"\x00\x00\x00\x00\x02"
        + b"\xab" * 40
    ),
}


def test_torn_tail_garbage_after_clean_stop(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic, segment = _ten_batches_then(broker, topic_name, broker.stop)
    good_size = file_size(segment)
    _append_garbage(segment, GARBAGE["random"])

    broker.start()
    assert file_size(segment) == good_size, "garbage was not truncated"
    _check_recovered(broker, topic, 10)


def test_torn_tail_garbage_after_kill(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic, segment = _ten_batches_then(broker, topic_name, broker.kill)
    good_size = file_size(segment)
    for garbage in GARBAGE.values():
        _append_garbage(segment, garbage)
        broker.start()
        assert file_size(segment) == good_size, "garbage was not truncated"
        assert watermarks(broker.bootstrap, topic, 0) == (0, 10)
        broker.kill()
    broker.start()
    _check_recovered(broker, topic, 10)


def test_torn_tail_half_written_last_batch(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic, segment = _ten_batches_then(broker, topic_name, broker.kill)
    batches = batch_positions(segment)
    assert len(batches) == 10
    last_pos, last_size, last_base = batches[-1]
    assert last_base == 9
    os.truncate(segment, last_pos + last_size // 2)

    broker.start()
    assert file_size(segment) == last_pos
    _check_recovered(broker, topic, 9)


def test_torn_tail_corrupted_last_batch_crc(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """A whole-length last batch whose bytes were not all written (CRC mismatch)."""
    topic, segment = _ten_batches_then(broker, topic_name, broker.kill)
    last_pos, last_size, _ = batch_positions(segment)[-1]
    with open(segment, "r+b") as f:
        f.seek(last_pos + last_size - 3)
        f.write(b"\x00\x00\x00")
    broker.start()
    assert file_size(segment) == last_pos
    _check_recovered(broker, topic, 9)


def test_clean_shutdown_marker_and_quick_restart(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """SIGTERM writes the clean-shutdown marker; the running broker has none on disk."""
    topic = topic_name()
    produce_all(producer(broker.bootstrap), topic, [{"value": b"v"}])
    assert not (broker.data_dir / CLEAN_SHUTDOWN).exists()
    started = time.monotonic()
    broker.restart()
    assert time.monotonic() - started < 20
    assert watermarks(broker.bootstrap, topic, 0) == (0, 1)


def _many_segments_then_kill(
    broker: BrokerProcess, topic_name: Callable[..., str], count: int
) -> tuple[str, list[Path]]:
    """A new topic of `count` small batches in 2 KiB segments (at least three), then kill -9:
    the topic and its segment files."""
    topic = topic_name()
    create_topic(
        broker.bootstrap,
        topic,
        1,
        {"segment.bytes": "2048", "index.interval.bytes": "100"},
    )
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(
        prod,
        topic,
        (
            {"value": b"msg-%03d" % i + b"." * 80, "partition": 0, "timestamp": TS_BASE + i}
            for i in range(count)
        ),
    )
    broker.kill()
    segments = segment_files(broker.data_dir, topic, 0)
    assert len(segments) >= 3
    return topic, segments


TS_BASE = 1_700_000_000_000


def _check_readable(broker: BrokerProcess, topic: str, count: int) -> None:
    assert watermarks(broker.bootstrap, topic, 0) == (0, count)
    for start in (0, count // 3, count - 1):
        consumed = consume_all(broker.bootstrap, topic, [0], start=start)[0]
        assert [c.offset for c in consumed] == list(range(start, count))
        assert all(c.value.startswith(b"msg-%03d" % c.offset) for c in consumed)
    cons = consumer(broker.bootstrap)
    try:
        for target in (TS_BASE, TS_BASE + count // 2, TS_BASE + count - 1):
            (found,) = cons.offsets_for_times([TopicPartition(topic, 0, target)], timeout=20)
            assert found.offset == target - TS_BASE
    finally:
        cons.close()


@pytest.mark.parametrize("damage", ["deleted", "garbage", "truncated"])
def test_index_files_rebuilt(
    broker: BrokerProcess, topic_name: Callable[..., str], damage: str
) -> None:
    """Offset and time indexes are derived data: damaged or missing, they are rebuilt and
    every lookup (fetch from an offset, offsets_for_times) still works."""
    topic, segments = _many_segments_then_kill(broker, topic_name, 60)
    for segment in segments:
        for suffix in (".index", ".timeindex"):
            index = segment.with_suffix(suffix)
            if damage == "deleted":
                index.unlink(missing_ok=True)
            elif damage == "garbage":
                index.write_bytes(bytes((i * 37) % 256 for i in range(120)))
            else:
                with open(index, "r+b") as f:
                    f.truncate(max(file_size(index) // 2 - 3, 0))
    broker.start()
    _check_readable(broker, topic, 60)
    produced = produce_all(producer(broker.bootstrap), topic, [{"value": b"msg-060"}])
    assert produced.succeeded[0].offset == 60


def test_kill_9_with_many_segments_and_torn_tail(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic, segments = _many_segments_then_kill(broker, topic_name, 60)
    _append_garbage(segments[-1], GARBAGE["fake-header"])
    broker.start()
    assert [s.name for s in segment_files(broker.data_dir, topic, 0)] == [s.name for s in segments]
    _check_readable(broker, topic, 60)


def test_torn_middle_segment_truncates_the_rest(
    broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """Damage in an older segment that recovery scans: recovery keeps everything before it
    and, as Kafka does, drops the later segments (they follow invalid data). Without the
    recovery-point checkpoint every segment is recovered (Kafka's rule), so which
    segments were flushed before the crash does not matter."""
    topic, segments = _many_segments_then_kill(broker, topic_name, 60)
    (broker.data_dir / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    middle = segments[1]
    positions = batch_positions(middle)
    pos, size, base = positions[len(positions) // 2]
    with open(middle, "r+b") as f:
        f.seek(pos + size - 2)
        f.write(b"\xff\xff")
    broker.start()
    assert watermarks(broker.bootstrap, topic, 0) == (0, base)
    consumed = consume_all(broker.bootstrap, topic, [0])[0]
    assert [c.offset for c in consumed] == list(range(base))
    produced = produce_all(producer(broker.bootstrap), topic, [{"value": b"after"}])
    assert produced.succeeded[0].offset == base
