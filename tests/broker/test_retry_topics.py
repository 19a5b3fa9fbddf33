"""Retry topics through the ReplicaManager, with a clock the test moves: a record produced to
a retry topic moves to its target after the backoff, attempt number one higher, then to the
dead-letter topic; exactly once, also across an interrupted move."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from test_delayed_delivery import T0, Clock, batch, held, log_records, open_broker, produce

from kafkalite.broker.broker import Broker
from kafkalite.broker.retry_topics import murmur2

RETRY = {
    "kafkalite.retry.target": "work",
    "kafkalite.retry.backoff.ms": "100,200",
    "kafkalite.retry.max.attempts": "2",
    "kafkalite.retry.dead.letter.topic": "dead",
}


@pytest.fixture
def clock() -> Clock:
    return Clock()


def setup(tmp_path: Path, clock: Clock, retry: dict[str, str] | None = None) -> Broker:
    broker = open_broker(tmp_path, clock)
    for name, partitions, configs in (
        ("work", 3, {}),
        ("dead", 1, {}),
        ("work-retry", 2, RETRY if retry is None else retry),
    ):
        outcome, _ = broker.admin_manager.create_topic(name, partitions, 1, configs)
        assert outcome.ok, outcome
    return broker


def attempt(n: int) -> list[tuple[str, bytes]]:
    return [("kafkalite-retry-attempt", b"%d" % n)]


def work_partition(key: bytes) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % 3


def records_of(broker: Broker, topic: str, partitions: int) -> list[tuple[int, bytes, tuple]]:
    return [
        (p, r.value or b"", r.headers)
        for p in range(partitions)
        for r in log_records(broker, (topic, p))
    ]


def test_kafkas_murmur2() -> None:
    def signed(value: int) -> int:
        return value - (1 << 32) if value >= 1 << 31 else value

    assert signed(murmur2(b"21")) == -973932308
    assert signed(murmur2(b"foobar")) == -790332482
    assert signed(murmur2(b"a-little-bit-longer-string")) == -1486304829
    assert signed(murmur2(b"abc")) == 479470107


def test_a_record_moves_after_each_backoff_then_to_the_dead_letter_topic(
    tmp_path: Path, clock: Clock
) -> None:
    broker = setup(tmp_path, clock)
    retry = ("work-retry", 1)
    # batch() keys its records k0, k1, ...
    result = produce(broker, batch([(b"a", [("trace", b"1")]), (b"b", attempt(1))]), retry)
    assert result.error is ErrorCode.none
    assert held(broker) == 2
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    assert records_of(broker, "work", 3) == [
        (work_partition(b"k0"), b"a", (("trace", b"1"), ("kafkalite-retry-attempt", b"1")))
    ]
    clock.now = T0 + 200
    broker.replica_manager.release_delayed()
    assert (work_partition(b"k1"), b"b", (("kafkalite-retry-attempt", b"2"),)) in records_of(
        broker, "work", 3
    )
    assert records_of(broker, "work-retry", 2) == []  # nothing stays in the retry topic

    assert produce(broker, batch([(b"a", attempt(2))]), retry).error is ErrorCode.none
    assert records_of(broker, "dead", 1) == [
        (
            0,
            b"a",
            (
                ("__dlq.errors.topic", b"work-retry"),
                ("__dlq.errors.partition", b"1"),
                ("kafkalite-retry-attempt", b"2"),
            ),
        )
    ]
    assert held(broker) == 0
    broker.shutdown()


def test_keyless_records_go_to_the_retry_partitions_index(tmp_path: Path, clock: Clock) -> None:
    from kafkalite.storage.records import Record, encode_record_batch

    broker = setup(tmp_path, clock, {**RETRY, "kafkalite.retry.backoff.ms": "0"})
    keyless = encode_record_batch(
        [Record(0, T0, None, b"x", ())], base_offset=0, base_timestamp=T0, max_timestamp=T0
    )
    produce(broker, keyless, ("work-retry", 1))
    assert records_of(broker, "work", 3) == [(1, b"x", (("kafkalite-retry-attempt", b"1"),))]
    broker.shutdown()


def test_bad_attempt_headers_and_no_dead_letter_topic_are_refused(
    tmp_path: Path, clock: Clock
) -> None:
    no_dlt = {k: v for k, v in RETRY.items() if k != "kafkalite.retry.dead.letter.topic"}
    broker = setup(tmp_path, clock, no_dlt)
    result = produce(
        broker, batch([(b"a", []), (b"b", [("kafkalite-retry-attempt", b"x")])]), ("work-retry", 0)
    )
    assert result.error is ErrorCode.invalid_record
    assert [e.batch_index for e in result.record_errors] == [1]
    assert "kafkalite-retry-attempt" in result.record_errors[0].message
    result = produce(broker, batch([(b"a", attempt(2))]), ("work-retry", 0))
    assert result.error is ErrorCode.invalid_record
    assert "kafkalite.retry.dead.letter.topic" in result.record_errors[0].message
    assert held(broker) == 0
    broker.shutdown()


def test_a_move_interrupted_before_the_target_append_happens_once(
    tmp_path: Path, clock: Clock
) -> None:
    broker = setup(tmp_path, clock)
    retry = ("work-retry", 0)
    produce(broker, batch([(b"a", [])]), retry)
    store = broker.replica_manager.delayed_delivery.stores[retry]
    clock.now = T0 + 100
    taken = store.take_due(clock.now, 10)
    target = ("work", work_partition(b"k0"))
    store.write_intent(target, 0, [offset for _, offset in taken], clock.now)
    broker.shutdown()  # dies before the append to the target

    broker = setup_again(tmp_path, clock)
    assert held(broker) == 1
    broker.replica_manager.release_delayed()
    broker.shutdown()
    broker = setup_again(tmp_path, clock)
    broker.replica_manager.release_delayed()
    assert [value for _, value, _ in records_of(broker, "work", 3)] == [b"a"]
    broker.shutdown()


def test_a_missing_target_topic_is_refused(tmp_path: Path, clock: Clock) -> None:
    broker = setup(tmp_path, clock, {**RETRY, "kafkalite.retry.target": "nowhere"})
    result = produce(broker, batch([(b"a", [])]), ("work-retry", 0))
    assert result.error is ErrorCode.invalid_record
    assert "nowhere" in (result.message or "")
    assert held(broker) == 0
    broker.shutdown()


def test_records_for_a_deleted_target_are_dropped(tmp_path: Path, clock: Clock) -> None:
    broker = setup(tmp_path, clock)
    produce(broker, batch([(b"a", [])]), ("work-retry", 0))
    broker.admin_manager.delete_topic("work")
    clock.now = T0 + 100
    assert broker.replica_manager.release_delayed() == 0
    assert broker.replica_manager.delayed_delivery.dropped == 1
    broker.shutdown()


def setup_again(tmp_path: Path, clock: Clock) -> Broker:
    return open_broker(tmp_path, clock)


def test_a_target_not_led_here_waits_with_its_release_written(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = setup(tmp_path, clock)
    produce(broker, batch([(b"a", [])]), ("work-retry", 0))
    delayed = broker.replica_manager.delayed_delivery
    found = delayed.partition_of
    monkeypatch.setattr(delayed, "partition_of", lambda tp: None if tp[0] == "work" else found(tp))
    clock.now = T0 + 100
    assert broker.replica_manager.release_delayed() == 1  # held still, being forwarded
    store = delayed.stores[("work-retry", 0)]
    assert store.forwarding is not None and store.forwarding.producer is not None
    end = store.log.log_end_offset
    clock.now = T0 + 200
    assert broker.replica_manager.release_delayed() == 1
    assert store.log.log_end_offset == end  # no intent more: the same release waits
    monkeypatch.setattr(delayed, "partition_of", found)
    clock.now = T0 + 300
    assert broker.replica_manager.release_delayed() == 0
    assert [value for _, value, _ in records_of(broker, "work", 3)] == [b"a"]
    assert store.forwarding is None
    broker.shutdown()
