"""ReplicaManager: the data path through Partition and the purgatories, on a real broker."""

from __future__ import annotations

import trio
import trio.testing
from kio.schema.errors import ErrorCode
from partition_fixtures import batch

from kafkalite.broker.broker import Broker
from kafkalite.broker.delayed import DelayedFetch, FetchInfo, FetchParams
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.partition import PartitionState, Replica
from kafkalite.config import build_config

TP = ("t", 0)


def open_broker(tmp_path, **overrides: str) -> Broker:
    broker = Broker.open(build_config({"log.dirs": str(tmp_path), **overrides}))
    outcome, _ = broker.admin_manager.create_topic("t", 2, 1)
    assert outcome.ok
    return broker


def test_acks_all_on_a_single_node_completes_at_once(tmp_path) -> None:
    broker = open_broker(tmp_path)
    manager = broker.replica_manager
    results, delayed = manager.append_records({TP: batch(2)}, -1)
    assert delayed is not None
    assert manager.produce_purgatory.try_complete_else_watch(delayed) is True
    assert delayed.results[TP].error is ErrorCode.none
    assert manager.produce_purgatory.watched() == 0
    broker.shutdown()


def test_append_checks_internal_topics_and_caps_min_insync_at_the_replicas(tmp_path) -> None:
    broker = open_broker(tmp_path, **{"min.insync.replicas": "2"})
    manager = broker.replica_manager
    broker.admin_manager.create_topic("__consumer_offsets", 1, 1)
    results, _ = manager.append_records({("__consumer_offsets", 0): batch()}, 1)
    assert results[("__consumer_offsets", 0)].error is ErrorCode.invalid_topic_exception
    results, _ = manager.append_records(
        {("__consumer_offsets", 0): batch()}, 1, internal_topics_allowed=True
    )
    assert results[("__consumer_offsets", 0)].error is ErrorCode.none
    # Kafka's effectiveMinIsr: min.insync.replicas=2 on one replica means 1.
    results, _ = manager.append_records({TP: batch()}, -1)
    assert results[TP].error is ErrorCode.none
    assert manager.partition(*TP).log_end_offset > 0
    broker.shutdown()


def _hold_back_high_watermark(broker: Broker) -> None:
    """Make broker 2 a follower in the ISR that never fetches: the HW stays where it is."""
    partition = broker.replica_manager.partition(*TP)
    state = PartitionState("t", 0, (0, 2), 0, partition.leader_epoch + 1, (0, 2))
    assert partition.make_leader(state, now_ms=0) is ErrorCode.none


def test_acks_all_parks_until_timeout(tmp_path) -> None:
    broker = open_broker(tmp_path, **{"broker.id": "0"})
    manager = broker.replica_manager
    _hold_back_high_watermark(broker)

    async def main() -> None:
        _, delayed = manager.append_records({TP: batch()}, -1)
        assert delayed is not None
        await complete_or_expire(manager.produce_purgatory, delayed, 30_000)
        assert delayed.results[TP].error is ErrorCode.request_timed_out
        assert manager.produce_purgatory.watched() == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    broker.shutdown()


def test_parked_fetch_is_woken_by_an_append_to_its_partition_only(tmp_path) -> None:
    broker = open_broker(tmp_path)
    manager = broker.replica_manager
    params = FetchParams(max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20)
    delayed = manager.fetch_messages(params, [FetchInfo("t", 0, 0, 1 << 20)])

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(complete_or_expire, manager.fetch_purgatory, delayed, 60_000)
            await trio.testing.wait_all_tasks_blocked()
            assert manager.fetch_purgatory.watched(TP) == 1
            manager.append_records({("t", 1): batch()}, 1)
            assert not delayed.completed
            manager.append_records({TP: batch(3)}, 1)
            assert delayed.completed and not delayed.expired
        (result,) = delayed.read_result.results
        assert (result.error, result.high_watermark) == (ErrorCode.none, 3)
        assert result.records

    trio.run(main)
    broker.shutdown()


def test_retention_keeps_segments_at_or_above_the_high_watermark(tmp_path) -> None:
    broker = open_broker(tmp_path, **{"broker.id": "0"})
    manager = broker.replica_manager
    broker.admin_manager.set_topic_configs("t", {"retention.ms": "0", "segment.bytes": "100"})
    for _ in range(3):
        manager.append_records({TP: batch()}, 1)
    partition = manager.partition(*TP)
    _hold_back_high_watermark(broker)  # HW stays at 3
    for _ in range(3):
        manager.append_records({TP: batch()}, 1)
    assert (partition.high_watermark, partition.log_end_offset) == (3, 6)
    manager.apply_retention()
    assert partition.log_start_offset == 3
    assert partition.log.segments[0].base_offset == 3
    broker.shutdown()


def test_parked_requests_answer_when_their_topic_is_deleted(tmp_path) -> None:
    broker = open_broker(tmp_path, **{"broker.id": "0"})
    manager = broker.replica_manager
    _hold_back_high_watermark(broker)
    _, produce = manager.append_records({TP: batch()}, -1)
    assert produce is not None
    assert manager.produce_purgatory.try_complete_else_watch(produce) is False
    params = FetchParams(max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20)
    fetch = manager.fetch_messages(params, [FetchInfo("t", 0, 1, 1 << 20)])
    assert manager.fetch_purgatory.try_complete_else_watch(fetch) is False
    assert broker.admin_manager.delete_topic("t").ok
    assert produce.results[TP].error is ErrorCode.unknown_topic_or_partition
    assert fetch.read_result.results[0].error is ErrorCode.unknown_topic_or_partition
    assert (manager.produce_purgatory.watched(), manager.fetch_purgatory.watched()) == (0, 0)
    broker.shutdown()


def _follower_fetch(manager, offset: int) -> DelayedFetch:
    params = FetchParams(max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, replica_id=2)
    epoch = manager.partition(*TP).leader_epoch
    return manager.fetch_messages(params, [FetchInfo("t", 0, offset, 1 << 20, epoch)])


def test_a_follower_fetch_records_its_position_once(tmp_path, monkeypatch) -> None:
    # Kafka's fetchMessages records a follower's fetch once per request; neither the
    # fetch's reads nor the parked fetch's retries record it again.
    broker = open_broker(tmp_path, **{"broker.id": "0"})
    manager = broker.replica_manager
    _hold_back_high_watermark(broker)
    recorded: list[int] = []
    original = Replica.update_fetch_state

    def counting(replica: Replica, fetch_offset: int, *args: int) -> None:
        recorded.append(fetch_offset)
        original(replica, fetch_offset, *args)

    monkeypatch.setattr(Replica, "update_fetch_state", counting)
    fetch = _follower_fetch(manager, 0)
    assert manager.fetch_purgatory.try_complete_else_watch(fetch) is False
    manager.append_records({TP: batch()}, 1)
    assert fetch.completed and fetch.read_result.bytes_read > 0
    assert recorded == [0]
    broker.shutdown()


def test_a_parked_fetch_reads_once_more_on_completion_only(tmp_path, monkeypatch) -> None:
    broker = open_broker(tmp_path)
    manager = broker.replica_manager
    reads: list[int] = []
    original = manager.read_from_local_log

    def counting(*args):
        reads.append(1)
        return original(*args)

    monkeypatch.setattr(manager, "read_from_local_log", counting)
    size = len(batch())
    params = FetchParams(max_wait_ms=60_000, min_bytes=3 * size, max_bytes=1 << 20)
    fetch = manager.fetch_messages(params, [FetchInfo("t", 0, 0, 1 << 20)])
    assert manager.fetch_purgatory.try_complete_else_watch(fetch) is False
    for _ in range(2):
        manager.append_records({TP: batch()}, 1)
    assert not fetch.completed and len(reads) == 1  # retries read nothing
    manager.append_records({TP: batch()}, 1)
    assert fetch.completed and len(reads) == 2
    assert fetch.read_result.bytes_read == 3 * size
    broker.shutdown()


def test_a_parked_follower_fetch_is_woken_by_an_append(tmp_path) -> None:
    # Kafka's appendRecords completes delayed fetches of the partition: the follower learns of
    # new data at once, not after its max wait; its next fetch completes the acks=all produce.
    broker = open_broker(tmp_path, **{"broker.id": "0"})
    manager = broker.replica_manager
    _hold_back_high_watermark(broker)

    async def main() -> None:
        fetch = _follower_fetch(manager, 0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(complete_or_expire, manager.fetch_purgatory, fetch, 60_000)
            await trio.testing.wait_all_tasks_blocked()
            assert manager.fetch_purgatory.watched(TP) == 1
            _, produce = manager.append_records({TP: batch(2)}, -1)
            assert produce is not None
            assert manager.produce_purgatory.try_complete_else_watch(produce) is False
        assert fetch.completed and not fetch.expired
        assert trio.current_time() == 0  # woken by the append, not by the clock
        (result,) = fetch.read_result.results
        assert (result.error, result.high_watermark) == (ErrorCode.none, 0)
        assert result.records == manager.partition(*TP).log.read(0, 1 << 20, 2)
        next_fetch = _follower_fetch(manager, 2)  # what the follower sends next, at once
        assert produce.completed and produce.results[TP].error is ErrorCode.none
        assert manager.fetch_purgatory.try_complete_else_watch(next_fetch) is False

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    broker.shutdown()
