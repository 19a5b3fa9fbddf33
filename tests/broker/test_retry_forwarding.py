"""A retry topic's releases forwarded with a broker-owned idempotent producer
(broker/release_forwarding.py): exactly once across a restart between the target's append
and the store's Forwarded record, to targets led by other brokers, and across the retry
partition's leader stopping in the middle of a forwarded release."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
from cluster_fixtures import ManualClock, running_cluster
from kio.schema.errors import ErrorCode
from test_delayed_delivery import T0, Clock, batch, log_records, produce
from test_replication import until
from test_retry_topics import RETRY, setup, setup_again, work_partition

from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.delayed_delivery import (
    Forwarded,
    Intent,
    ReleaseProducer,
    decode_marker,
    encode_forwarded,
    encode_intent,
)
from kafkalite.broker.delayed_delivery_store import DelayStore
from kafkalite.broker.release_forwarding import answer_outcome
from kafkalite.storage.batch import iter_batches, parse_header
from kafkalite.storage.errors import StorageError
from kafkalite.storage.records import Record, decode_records, encode_record_batch


def marker(batch: bytes):
    return decode_marker(decode_records(batch)[0])


def test_an_intent_names_its_producer_and_old_intents_still_decode() -> None:
    producer = ReleaseProducer(7, 0, 42)
    assert marker(encode_intent(("t", 2), -1, [5, 6], T0, producer)) == Intent(
        0, ("t", 2), -1, (5, 6), producer
    )
    assert marker(encode_intent(("t", 2), 9, [5], T0)) == Intent(0, ("t", 2), 9, (5,), None)
    assert marker(encode_forwarded(3, T0)) == Forwarded(3)


def test_answers_of_the_target() -> None:
    assert answer_outcome(ErrorCode.none) == ""
    assert answer_outcome(ErrorCode.duplicate_sequence_number) == ""
    assert answer_outcome(ErrorCode.not_leader_or_follower) is None
    assert answer_outcome(ErrorCode.not_enough_replicas) is None
    assert answer_outcome(ErrorCode.request_timed_out) is None
    assert "INVALID_RECORD" in (answer_outcome(ErrorCode.invalid_record) or "")


def test_a_restart_after_the_target_append_resends_and_the_target_drops_the_duplicate(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = setup(tmp_path, clock)
    retry = ("work-retry", 0)
    produce(broker, batch([(b"a", []), (b"b", [])]), retry)

    def dies(*_: object) -> None:
        raise StorageError("the broker dies before the Forwarded record")

    monkeypatch.setattr(DelayStore, "write_forwarded", dies)
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    moved = sorted(v for p in range(3) for v in (r.value for r in log_records(broker, ("work", p))))
    assert moved == [b"a", b"b"]
    broker.shutdown()
    monkeypatch.undo()

    broker = setup_again(tmp_path, clock)
    assert broker.replica_manager.delayed_delivery.held == 2  # not known to be forwarded
    broker.replica_manager.release_delayed()  # resent with the same producer and sequence
    assert broker.replica_manager.delayed_delivery.held == 0
    moved = sorted(v for p in range(3) for v in (r.value for r in log_records(broker, ("work", p))))
    assert moved == [b"a", b"b"]  # once each
    partition = broker.replica_manager.partition("work", work_partition(b"k0"))
    assert partition is not None
    data = memoryview(partition.log.read(0, 1 << 20, partition.log_end_offset))
    assert {parse_header(data[p : p + h.size]).producer_id >= 0 for p, h in iter_batches(data)} == {
        True
    }
    broker.shutdown()
    broker = setup_again(tmp_path, clock)  # resolved: nothing more to send
    broker.replica_manager.release_delayed()
    assert sorted(r.value for p in range(3) for r in log_records(broker, ("work", p))) == [
        b"a",
        b"b",
    ]
    broker.shutdown()


# -- several brokers -------------------------------------------------------------------------

N = 40  # records produced to the retry topic


def retry_batch(start: int) -> bytes:
    records = [
        Record(i, T0, b"k%d" % (start + i), b"v%d" % (start + i), attempts(start + i))
        for i in range(10)
    ]
    return encode_record_batch(records, base_offset=0, base_timestamp=T0, max_timestamp=T0)


def attempts(n: int) -> tuple[tuple[str, bytes], ...]:
    """Every fifth record at its last attempt (dead letter at once), other odd ones at
    their second (due after 2 s), the rest at their first (due after 1 s)."""
    attempt = 2 if n % 5 == 0 else n % 2
    return (("kafkalite-retry-attempt", b"%d" % attempt),) if attempt else ()


async def poll(condition, timeout_s: float = 20) -> None:
    """Until `condition()` holds (the brokers' timers and sender run meanwhile)."""
    with trio.fail_after(timeout_s):
        while not condition():
            await trio.sleep(0.01)


def values_on(managers, topic: str, leader: int) -> list[bytes]:
    partition = managers[leader].partition(topic, 0)
    data = memoryview(partition.log.read(0, 1 << 24, partition.high_watermark))
    return [
        record.value
        for position, header in iter_batches(data)
        for record in decode_records(data[position : position + header.size])
    ]


def start(cluster, managers) -> None:
    for name, replicas in (("work", [2, 1, 3]), ("dead", [3, 1, 2])):
        cluster.topics[name] = topic = TopicMetadata(name, uuid.uuid4(), 1, 3, {})
        cluster.create(topic, [replicas])
    retry = {**RETRY, "kafkalite.retry.backoff.ms": "1000,2000"}
    cluster.topics["work-retry"] = topic = TopicMetadata("work-retry", uuid.uuid4(), 1, 3, retry)
    cluster.create(topic, [[1, 2, 3]])


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_replicated_retry_topic_forwards_to_leaders_elsewhere_once_across_a_failover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker 1 leads the retry partition (RF 3); broker 2 leads the target, broker 3 the
    dead-letter topic. Broker 1 forwards a release but never records it done, and stops;
    broker 2, elected, resends it (deduplicated by the target) and forwards the rest."""
    clock = ManualClock(T0)
    source = ("work-retry", 0)

    async def main() -> None:
        async with running_cluster(tmp_path, 3, clock) as (cluster, running):
            managers = {i: each.broker.replica_manager for i, each in running.items()}
            start(cluster, managers)
            for first in range(0, N, 10):
                results, _ = managers[1].append_records({source: retry_batch(first)}, 1)
                assert results[source].error is ErrorCode.none
            store_1 = managers[1].delayed_delivery.stores[source]
            assert store_1.held_count == N
            # The dead-letter records go at once, to broker 3.
            await until(lambda: store_1.held_count == N - N // 5, running)
            assert len(values_on(managers, "dead", 3)) == N // 5
            monkeypatch.setattr(
                store_1, "write_forwarded", lambda *_: (_ for _ in ()).throw(StorageError("x"))
            )
            first = [b"v%d" % n for n in range(N) if n % 5 and n % 2 == 0]
            clock.now_ms = T0 + 1000  # the first attempts are due: broker 1 forwards them
            await until(lambda: store_1.failed, running)  # answered, never recorded done
            assert store_1.forwarding is not None
            assert sorted(values_on(managers, "work", 2)) == sorted(first)
            running[1].stop()
            cluster.elect("work-retry", 0, leader=2, isr=(2, 3))
            cluster.elect("work", 0, leader=2, isr=(2, 3))  # (the controller drops 1 from ISRs)
            delayed_2 = managers[2].delayed_delivery
            await until(lambda: delayed_2.held == N - N // 5 - len(first), running)
            assert sorted(values_on(managers, "work", 2)) == sorted(first)  # resent, dropped
            clock.now_ms = T0 + 2000  # the second attempts: broker 2 forwards them
            await until(lambda: delayed_2.held == 0, running)
            work = values_on(managers, "work", 2)
            assert sorted(work) == sorted(b"v%d" % n for n in range(N) if n % 5)  # once each
            assert len(values_on(managers, "dead", 3)) == N // 5

    trio.run(main)


def test_a_single_replica_retry_topic_moves_records_to_a_target_led_elsewhere(
    tmp_path: Path,
) -> None:
    """(A defect: the release waited forever for the target to be led here.)"""
    clock = ManualClock(T0)
    source = ("work-retry", 0)

    async def main() -> None:
        async with running_cluster(tmp_path, 2, clock) as (cluster, running):
            managers = {i: each.broker.replica_manager for i, each in running.items()}
            for name, replicas, configs in (
                ("work", [2], {}),
                ("dead", [2], {}),
                ("work-retry", [1], {**RETRY, "kafkalite.retry.backoff.ms": "1000"}),
            ):
                cluster.topics[name] = topic = TopicMetadata(name, uuid.uuid4(), 1, 1, configs)
                cluster.create(topic, [replicas])
            results, _ = managers[1].append_records({source: retry_batch(0)}, 1)
            assert results[source].error is ErrorCode.none
            delayed_1 = managers[1].delayed_delivery
            await poll(lambda: delayed_1.held == 8)  # 2 dead letters went at once
            clock.now_ms = T0 + 1000
            await poll(lambda: delayed_1.held == 0)
            assert sorted(values_on(managers, "work", 2)) == sorted(
                b"v%d" % n for n in range(10) if n % 5
            )
            assert sorted(values_on(managers, "dead", 2)) == [b"v0", b"v5"]

    trio.run(main)


def test_a_replicated_retry_partition_appends_nothing_before_its_intent_is_replicated(
    tmp_path: Path,
) -> None:
    """Else a new leader, lacking the intent, would move the records again."""
    clock = ManualClock(T0)
    source = ("work-retry", 0)

    async def main() -> None:
        async with running_cluster(tmp_path, 3, clock) as (cluster, running):
            managers = {i: each.broker.replica_manager for i, each in running.items()}
            retry = {**RETRY, "kafkalite.retry.backoff.ms": "1000"}
            for name, configs in (("work", {}), ("dead", {}), ("work-retry", retry)):
                cluster.topics[name] = topic = TopicMetadata(name, uuid.uuid4(), 1, 3, configs)
                cluster.create(topic, [[1, 2, 3]])
            results, _ = managers[1].append_records({source: retry_batch(1)}, 1)
            assert results[source].error is ErrorCode.none
            running[2].stop()
            running[3].stop()  # still in the ISR: the store's high watermark stays
            clock.now_ms = T0 + 2000
            managers[1].release_delayed()
            store = managers[1].delayed_delivery.stores[source]
            assert store.forwarding is not None
            for name in ("work", "dead"):
                assert managers[1].partition(name, 0).log_end_offset == 0
            for name in ("work-retry", "work", "dead"):  # (the others are gone)
                cluster.elect(name, 0, leader=1, isr=(1,))
            await poll(lambda: managers[1].delayed_delivery.held == 0)
            assert sorted(values_on(managers, "work", 1)) == sorted(
                b"v%d" % n for n in range(1, 11) if n % 5
            )
            assert sorted(values_on(managers, "dead", 1)) == [b"v10", b"v5"]

    trio.run(main)
