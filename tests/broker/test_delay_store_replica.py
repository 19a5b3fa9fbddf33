"""The leader's side of the delay store's replication (broker/delay_store_replica.py): a
follower fetches partition P's store as the pseudo-partition P | 1<<30 of P's topic, copies
it unchanged, is told where it diverges by leader epoch, and the store's high watermark
follows P's ISR."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
from cluster_fixtures import ManualClock, running_cluster
from kio.schema.errors import ErrorCode
from partition_fixtures import open_partition
from test_replication import until

from kafkalite.broker.broker import Broker
from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.delay_store_replica import open_store_copy, store_partition, store_source
from kafkalite.broker.delayed import FetchInfo, FetchParams
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.partition import EARLIEST, LATEST, LogReadResult, PartitionState
from kafkalite.broker.replica_fetcher import Outcome, apply_partition_response
from kafkalite.config import build_config
from kafkalite.metrics.collector import BrokerCollector
from kafkalite.storage.batch import TRANSACTIONAL_FLAG, iter_batches
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.records import Record, decode_records, encode_record_batch

T0 = 1_800_000_000_000
LEADER, FOLLOWER = 0, 2
TP = ("d", 0)
STORE_TP = ("d", store_partition(0))
OPT_IN = {"kafkalite.delayed.delivery.enable": "true"}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def open_broker(path: Path, clock: Clock, configs: dict[str, str] | None = None) -> Broker:
    broker = Broker.open(
        build_config({"log.dirs": str(path / "leader"), "broker.id": str(LEADER)}),
        clock_ms=clock,
    )
    configs = OPT_IN if configs is None else configs
    outcome, _ = broker.admin_manager.create_topic("d", 1, 1, configs)
    assert outcome.ok
    return broker


def delayed(values: list[bytes], delay_ms: int) -> bytes:
    records = [
        Record(i, T0 + i, b"k", value, (("kafkalite-delay-ms", b"%d" % delay_ms),))
        for i, value in enumerate(values)
    ]
    return encode_record_batch(records, base_offset=0, base_timestamp=T0, max_timestamp=T0)


def hold(broker: Broker, values: list[bytes], delay_ms: int = 1000) -> None:
    results, _ = broker.replica_manager.append_records({TP: delayed(values, delay_ms)}, 1)
    assert results[TP].error is ErrorCode.none


def add_follower(broker: Broker) -> None:
    """A new epoch with FOLLOWER in P's replicas and ISR."""
    partition = broker.replica_manager.partition(*TP)
    state = PartitionState(
        "d", 0, (LEADER, FOLLOWER), LEADER, partition.leader_epoch + 1, (LEADER, FOLLOWER)
    )
    assert partition.make_leader(state, now_ms=T0) is ErrorCode.none


def fetch_store(
    broker: Broker,
    offset: int,
    *,
    replica_id: int = FOLLOWER,
    last_fetched_epoch: int = -1,
    current_leader_epoch: int = -1,
) -> LogReadResult:
    manager = broker.replica_manager
    params = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, replica_id=replica_id)
    info = FetchInfo(
        STORE_TP[0], STORE_TP[1], offset, 1 << 20, current_leader_epoch, last_fetched_epoch
    )
    fetch = manager.fetch_messages(params, [info])
    assert manager.fetch_purgatory.try_complete_else_watch(fetch) is True
    return fetch.read_result.results[0]


def store_log(broker: Broker) -> UnifiedLog:
    return broker.replica_manager.delayed_delivery.stores[TP].log


def epochs(log: UnifiedLog) -> list[int]:
    data = memoryview(log.read(log.log_start_offset, 1 << 24, log.log_end_offset))
    return [header.partition_leader_epoch for _, header in iter_batches(data)]


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_store_index_names_its_partition() -> None:
    assert store_source(store_partition(7)) == 7
    assert (store_source(7), store_source(-1)) == (None, None)


def test_every_store_batch_carries_the_partitions_leader_epoch(
    tmp_path: Path, clock: Clock
) -> None:
    """Held batches, intents (and cancellations, transaction ends): a follower's copy is
    truncated by these epochs, so none may be written without one."""
    broker = open_broker(tmp_path, clock)
    hold(broker, [b"a"], delay_ms=1000)
    hold(broker, [b"b"], delay_ms=5000)
    clock.now = T0 + 1000
    broker.replica_manager.release_delayed()
    epoch = broker.replica_manager.partition(*TP).leader_epoch
    log = store_log(broker)
    assert log.log_start_offset == 2  # a's batch is released and gone
    assert epochs(log) == [epoch, epoch, epoch]  # b's dues, b, the intent releasing a
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [epoch]
    broker.shutdown()


def test_a_follower_copies_the_store_and_the_store_high_watermark_follows_the_isr(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    hold(broker, [b"a", b"b"])
    add_follower(broker)
    leader_log = store_log(broker)
    end = leader_log.log_end_offset
    assert end == 3  # the dues record and the two held records

    first = fetch_store(broker, 0)
    assert (first.error, first.high_watermark, first.log_start_offset) == (ErrorCode.none, 0, 0)
    copy = UnifiedLog.open(tmp_path / "follower" / "d-0" / "delayed", LogConfig(), now_ms=T0)
    copy.append_as_follower(first.records, T0)
    assert copy.read(0, 1 << 20, end) == leader_log.read(0, 1 << 20, end)
    # The leader's epoch 1 began at the store's end (when it first served the store in it).
    assert [(e.epoch, e.start_offset) for e in leader_log.leader_epoch_cache.entries] == [
        (0, 0),
        (1, end),
    ]
    assert copy.leader_epoch_cache.entries == leader_log.leader_epoch_cache.entries[:1]

    caught_up = fetch_store(broker, end, last_fetched_epoch=copy.leader_epoch_cache.latest_epoch)
    assert (caught_up.error, caught_up.records, caught_up.high_watermark) == (
        ErrorCode.none,
        b"",
        end,
    )
    broker.shutdown()


def test_a_follower_that_left_the_leaders_store_is_told_where_to_truncate(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    hold(broker, [b"a"])  # store offsets 0-1 in epoch 0
    add_follower(broker)
    epoch = broker.replica_manager.partition(*TP).leader_epoch
    assert epoch == 1
    # The follower claims offsets up to 5 in epoch 0 (an old leader's it never lost):
    # epoch 0 ends at 2 here.
    result = fetch_store(broker, 5, last_fetched_epoch=0)
    assert (result.error, result.records, result.diverging_epoch) == (ErrorCode.none, b"", (0, 2))
    # Its position is not taken from a diverging fetch; it is once truncated there.
    assert fetch_store(broker, 5, last_fetched_epoch=0).high_watermark == 0
    assert fetch_store(broker, 2, last_fetched_epoch=0).high_watermark == 2
    manager = broker.replica_manager
    assert manager.last_offset_for_leader_epoch(STORE_TP, epoch, 0) == (ErrorCode.none, 0, 2)
    assert manager.last_offset_for_leader_epoch(STORE_TP, epoch, 1) == (ErrorCode.none, 1, 2)
    assert manager.last_offset_for_leader_epoch(STORE_TP, epoch + 1, 1)[0] is (
        ErrorCode.unknown_leader_epoch
    )
    broker.shutdown()


def test_list_offsets_of_the_store_for_a_follower(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    hold(broker, [b"a"])
    clock.now = T0 + 1000
    broker.replica_manager.release_delayed()  # released: the store's prefix goes
    add_follower(broker)
    manager = broker.replica_manager
    log = store_log(broker)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)  # all released, all gone
    earliest = manager.fetch_offset_for_timestamp(STORE_TP, EARLIEST, from_client=False)
    latest = manager.fetch_offset_for_timestamp(STORE_TP, LATEST, from_client=False)
    assert (earliest[0], earliest[1][0], latest[1][0]) == (ErrorCode.none, 3, 3)
    assert fetch_store(broker, 0).error is ErrorCode.offset_out_of_range
    # A client's ListOffsets does not see the pseudo-partition.
    assert manager.fetch_offset_for_timestamp(STORE_TP, EARLIEST)[0] is (
        ErrorCode.unknown_topic_or_partition
    )
    broker.shutdown()


def test_only_replicas_of_an_opted_in_leader_get_the_store(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    hold(broker, [b"a"])
    add_follower(broker)
    epoch = broker.replica_manager.partition(*TP).leader_epoch
    manager = broker.replica_manager
    consumer = manager.fetch_messages(
        FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20),
        [FetchInfo(*STORE_TP, 0, 1 << 20)],
    )
    manager.fetch_purgatory.try_complete_else_watch(consumer)
    assert consumer.read_result.results[0].error is ErrorCode.unknown_topic_or_partition
    assert fetch_store(broker, 0, replica_id=5).error is ErrorCode.not_leader_or_follower
    assert fetch_store(broker, 0, current_leader_epoch=epoch - 1).error is (
        ErrorCode.fenced_leader_epoch
    )
    # Demoted: no longer the leader.
    partition = manager.partition(*TP)
    state = PartitionState("d", 0, (LEADER, FOLLOWER), FOLLOWER, epoch + 1, (LEADER, FOLLOWER))
    assert partition.make_follower(state) is ErrorCode.none
    assert fetch_store(broker, 0).error is ErrorCode.not_leader_or_follower
    broker.shutdown()


def test_a_topic_that_did_not_opt_in_has_no_store_partition(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock, configs={})
    add_follower(broker)
    assert fetch_store(broker, 0).error is ErrorCode.unknown_topic_or_partition
    assert TP not in broker.replica_manager.delayed_delivery.stores
    broker.shutdown()


# -- followers copy the store ---------------------------------------------------------------


def store_bytes(log: UnifiedLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 24, log.log_end_offset)


def test_followers_copy_the_store_and_a_new_leader_releases_from_its_copy(tmp_path: Path) -> None:
    clock = ManualClock(T0)

    async def main() -> None:
        async with running_cluster(tmp_path, 3, clock) as (cluster, running):
            managers = {i: each.broker.replica_manager for i, each in running.items()}
            topic = TopicMetadata("d", uuid.uuid4(), 1, 3, dict(OPT_IN))
            cluster.topics["d"] = topic
            cluster.create(topic, [[1, 2, 3]])
            for values, delay_ms in (([b"a"], 1000), ([b"b", b"c"], 5000)):
                results, _ = managers[1].append_records({TP: delayed(values, delay_ms)}, 1)
                assert results[TP].error is ErrorCode.none
            leader_store = managers[1].delayed_delivery.stores[TP]
            assert leader_store.held_count == 3

            def copies_equal() -> bool:
                expected = store_bytes(leader_store.log)
                return all(
                    TP in managers[i].delayed_delivery.copies
                    and store_bytes(managers[i].delayed_delivery.copies[TP].log) == expected
                    for i in (2, 3)
                )

            await until(copies_equal, running)
            assert all(TP not in managers[i].delayed_delivery.stores for i in (2, 3))
            clock.now_ms = T0 + 1000  # a is due: released by broker 1 (intent, then P)
            await until(
                lambda: managers[1].partition(*TP).log_end_offset == 1 and copies_equal(),
                running,
            )
            await until(lambda: managers[2].partition(*TP).log_end_offset == 1, running)
            # Broker 2 takes over: it opens the store from its copy, broker 1 copies from it.
            cluster.elect("d", 0, leader=2, isr=(1, 2, 3))
            store = managers[2].delayed_delivery.stores[TP]
            assert (store.held_count, TP in managers[2].delayed_delivery.copies) == (2, False)
            assert TP in managers[1].delayed_delivery.copies
            assert TP not in managers[1].delayed_delivery.stores
            clock.now_ms = T0 + 5000
            managers[2].release_delayed()
            partition = managers[2].partition(*TP)
            data = memoryview(partition.log.read(0, 1 << 20, partition.log_end_offset))
            released = [
                record.value
                for position, header in iter_batches(data)
                for record in decode_records(data[position : position + header.size])
            ]
            assert released == [b"a", b"b", b"c"]  # each once
            assert managers[2].delayed_delivery.held == 0

    trio.run(main)


def test_a_followers_copy_diverging_from_the_leaders_store_is_truncated_by_epoch(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    hold(broker, [b"a"])  # store offsets 0-1, epoch 0
    add_follower(broker)  # epoch 1
    leader_log = store_log(broker)
    followed = open_partition(tmp_path / "follower", broker_id=FOLLOWER)
    followed.make_follower(
        PartitionState("t", 0, (LEADER, FOLLOWER), LEADER, 1, (LEADER, FOLLOWER))
    )
    copy = open_store_copy(followed, T0)
    assert (copy.index, copy.is_leader, copy.leader_epoch) == (store_partition(0), False, 1)
    copy.append_records_to_follower(fetch_store(broker, 0).records, T0)
    # What the dead leader of epoch 0 wrote after it and never shipped to the new one.
    copy.log.append_as_leader(delayed([b"lost"], 1000), 0, T0)
    assert copy.log_end_offset == 3

    def fetch() -> Outcome:
        read = fetch_store(
            broker, copy.log_end_offset, last_fetched_epoch=copy.log.leader_epoch_cache.latest_epoch
        )
        diverging = read.diverging_epoch or (-1, -1)
        data = SimpleNamespace(
            error_code=read.error,
            records=read.records,
            high_watermark=read.high_watermark,
            diverging_epoch=SimpleNamespace(epoch=diverging[0], end_offset=diverging[1]),
            log_start_offset=read.log_start_offset,
        )
        return apply_partition_response(copy, data, T0)

    assert fetch() is Outcome.TRUNCATED
    assert copy.log_end_offset == 2
    assert fetch() is Outcome.FETCHED
    assert store_bytes(copy.log) == store_bytes(leader_log)
    broker.shutdown()


def follower_fetch(broker: Broker, store_offset: int, max_wait_ms: int = 0):
    """A follower's fetch of P (at its log end) and of P's store, as its fetcher sends it."""
    manager = broker.replica_manager
    params = FetchParams(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, replica_id=2)
    end = manager.partition(*TP).log_end_offset
    infos = [FetchInfo(*TP, end, 1 << 20), FetchInfo(*STORE_TP, store_offset, 1 << 20)]
    return manager.fetch_messages(params, infos)


def test_acks_all_of_a_held_batch_waits_for_the_store_high_watermark(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    add_follower(broker)
    manager = broker.replica_manager
    results, produce = manager.append_records({TP: delayed([b"a"], 1000)}, -1)
    assert results[TP].error is ErrorCode.none and produce is not None
    assert manager.produce_purgatory.try_complete_else_watch(produce) is False
    end = store_log(broker).log_end_offset
    assert end == 2
    fetch = follower_fetch(broker, 0)  # the follower has none of the store yet
    manager.fetch_purgatory.try_complete_else_watch(fetch)
    assert fetch.read_result.results[1].records  # the held batch, to copy
    assert not produce.completed
    fetch = follower_fetch(broker, end)  # copied: the store high watermark reaches it
    manager.fetch_purgatory.try_complete_else_watch(fetch)
    assert produce.completed and produce.results[TP].error is ErrorCode.none
    assert manager.produce_purgatory.watched() == 0
    broker.shutdown()


def test_a_parked_follower_fetch_is_woken_by_a_hold(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    add_follower(broker)
    manager = broker.replica_manager
    fetch = follower_fetch(broker, 0, max_wait_ms=60_000)
    assert manager.fetch_purgatory.try_complete_else_watch(fetch) is False
    manager.append_records({TP: delayed([b"a"], 1000)}, 1)  # held: P itself gets nothing
    assert fetch.completed
    assert [bool(r.records) for r in fetch.read_result.results] == [False, True]
    broker.shutdown()


def partition_records(fetch) -> bytes:
    return fetch.read_result.results[0].records


def test_a_follower_gets_a_release_only_with_its_intent(tmp_path: Path, clock: Clock) -> None:
    """The fences: P's records reach a follower only once its store copy has what they
    depend on (the new leader's store at election; a release's intent)."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    plain = encode_record_batch(
        [Record(0, T0, b"k", b"x", ())], base_offset=0, base_timestamp=T0, max_timestamp=T0
    )
    manager.append_records({TP: plain}, 1)  # P: x at 0
    hold(broker, [b"a"])  # store: dues and a at 0-1
    add_follower(broker)  # epoch 1: its first fence is (0, store end 2)

    def fetch(offset: int, store_offset: int) -> list[bytes | None]:
        """P's records a follower at `offset` in P and `store_offset` in the store gets."""
        params = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, replica_id=FOLLOWER)
        infos = [FetchInfo(*TP, offset, 1 << 20), FetchInfo(*STORE_TP, store_offset, 1 << 20)]
        done = manager.fetch_messages(params, infos)
        manager.fetch_purgatory.try_complete_else_watch(done)
        data = memoryview(done.read_result.results[0].records)
        return [
            record.value
            for position, header in iter_batches(data)
            for record in decode_records(data[position : position + header.size])
        ]

    assert fetch(0, 0) == []  # its copy lacks the store the leader had at election
    assert fetch(0, 2) == [b"x"]
    clock.now = T0 + 1000
    manager.release_delayed()  # the intent at store offset 2, a at P offset 1
    assert (manager.partition(*TP).log_end_offset, store_log(broker).log_end_offset) == (2, 3)
    assert fetch(1, 2) == []  # its copy lacks the intent
    assert fetch(1, 3) == [b"a"]
    broker.shutdown()


def test_a_new_leader_resolves_every_release_and_cancels_those_it_lacks(
    tmp_path: Path, clock: Clock
) -> None:
    """An old leader's intent whose release never reached this replica is held again and
    cancelled in the store: once the partition grows past the intent's offset, a later
    leader must not take it for done (the sketch resolved only the last intent, unwritten)."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    delivery = manager.delayed_delivery
    hold(broker, [b"a"], delay_ms=100)  # store 0-1
    hold(broker, [b"b"], delay_ms=5000)  # store 2-3
    clock.now = T0 + 100
    manager.release_delayed()  # intent (P offset 0) at 4, a at P offset 0
    partition = manager.partition(*TP)
    store = delivery.stores[TP]
    # The old leader's last release: its intent replicated here, its append to P not.
    store.write_intent(TP, 1, [3], clock.now, partition.leader_epoch)
    assert partition.log_end_offset == 1
    delivery.close_store(TP)

    delivery.take_over(partition, clock.now)  # as a new leader, from its copy
    assert delivery.held == 1  # b: its release did not reach P here
    plain = encode_record_batch(
        [Record(0, T0, b"k", b"x", ())], base_offset=0, base_timestamp=T0, max_timestamp=T0
    )
    manager.append_records({TP: plain}, 1)  # P grows past the intent's offset 1
    delivery.close_store(TP)
    delivery.take_over(partition, clock.now)  # the next leader
    assert delivery.held == 1  # the cancellation says b was not released
    clock.now = T0 + 5000
    manager.release_delayed()
    data = memoryview(partition.log.read(0, 1 << 20, partition.log_end_offset))
    values = [
        record.value
        for position, header in iter_batches(data)
        for record in decode_records(data[position : position + header.size])
    ]
    assert values == [b"a", b"x", b"b"]  # each once
    broker.shutdown()


def test_the_store_keeps_released_records_until_the_partition_has_them_replicated(
    tmp_path: Path, clock: Clock
) -> None:
    """Followers' copies follow the store's log start: it must not pass a release their
    partition may still lack, or a follower elected without it would have lost them."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    hold(broker, [b"a"], delay_ms=100)  # store 0-1
    add_follower(broker)
    clock.now = T0 + 100
    manager.release_delayed()  # intent at 2, a at P offset 0; P's high watermark still 0
    log = store_log(broker)
    assert (log.log_start_offset, manager.partition(*TP).high_watermark) == (0, 0)
    params = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, replica_id=FOLLOWER)
    fetch = manager.fetch_messages(
        params, [FetchInfo(*TP, 1, 1 << 20), FetchInfo(*STORE_TP, 3, 1 << 20)]
    )  # the follower has a in P (and the intent)
    manager.fetch_purgatory.try_complete_else_watch(fetch)
    assert manager.partition(*TP).high_watermark == 1
    manager.release_delayed()
    assert log.log_start_offset == 3
    broker.shutdown()


def test_a_leader_stopped_in_the_middle_of_a_release_loses_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    """Broker 1 releases a record after it stopped serving (its intent and append never
    reach the others); broker 2, elected, releases it from its copy: once, with the rest."""
    clock = ManualClock(T0)

    async def main() -> None:
        async with running_cluster(tmp_path, 3, clock) as (cluster, running):
            managers = {i: each.broker.replica_manager for i, each in running.items()}
            topic = TopicMetadata("d", uuid.uuid4(), 1, 3, dict(OPT_IN))
            cluster.topics["d"] = topic
            cluster.create(topic, [[1, 2, 3]])
            for values, delay_ms in (([b"a"], 1000), ([b"b"], 1000), ([b"c"], 9000)):
                results, produce = managers[1].append_records({TP: delayed(values, delay_ms)}, -1)
                assert produce is not None
                await complete_or_expire(managers[1].produce_purgatory, produce, 30_000)
                assert produce.results[TP].error is ErrorCode.none  # the copies have it
            running[1].stop()
            clock.now_ms = T0 + 1000
            managers[1].release_delayed()  # a and b appended on broker 1 only
            assert managers[1].partition(*TP).log_end_offset == 2
            cluster.elect("d", 0, leader=2, isr=(2, 3))
            assert managers[2].delayed_delivery.held == 3
            managers[2].release_delayed()
            clock.now_ms = T0 + 9000
            managers[2].release_delayed()
            partition = managers[2].partition(*TP)
            data = memoryview(partition.log.read(0, 1 << 20, partition.log_end_offset))
            released = [
                record.value
                for position, header in iter_batches(data)
                for record in decode_records(data[position : position + header.size])
            ]
            assert sorted(released) == [b"a", b"b", b"c"]  # each once
            await until(lambda: managers[3].partition(*TP).log_end_offset == 3, running)

    trio.run(main)


def test_a_leader_restarting_with_a_replicated_store_resolves_it_as_a_new_leader(
    tmp_path: Path, clock: Clock
) -> None:
    """Loaded at startup as the leader of a replicated partition (it may have followed it
    before, with an old leader's intent it lacks the release of), the store is taken over:
    the intent is cancelled, not only held again in memory."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    delivery = manager.delayed_delivery
    hold(broker, [b"b"], delay_ms=5000)  # store 0-1
    add_follower(broker)
    partition = manager.partition(*TP)
    delivery.stores[TP].write_intent(TP, 0, [1], clock.now, partition.leader_epoch)
    delivery.close_store(TP)
    delivery.load({TP: partition}, clock.now)  # as at startup
    assert delivery.held == 1
    plain = encode_record_batch(
        [Record(0, T0, b"k", b"x", ())], base_offset=0, base_timestamp=T0, max_timestamp=T0
    )
    manager.append_records({TP: plain}, 1)  # P grows past the intent's offset 0
    delivery.close_store(TP)
    delivery.take_over(partition, clock.now)  # the next leader
    assert delivery.held == 1
    broker.shutdown()


def test_a_follower_gets_a_transactions_marker_only_with_its_end_in_the_store(
    tmp_path: Path, clock: Clock
) -> None:
    """Else a follower elected with the commit marker but not the store's transaction end
    would hold the transaction's records forever."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    records = [Record(0, T0, b"k", b"a", (("kafkalite-delay-ms", b"100"),))]
    txn = encode_record_batch(
        records,
        base_offset=0,
        base_timestamp=T0,
        max_timestamp=T0,
        producer_id=4,
        producer_epoch=0,
        base_sequence=0,
        attributes=TRANSACTIONAL_FLAG,
    )
    assert manager.append_records({TP: txn}, 1)[0][TP].error is ErrorCode.none
    add_follower(broker)
    end = store_log(broker).log_end_offset  # the dues and the held record

    def partition_bytes(store_offset: int) -> bytes:
        params = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, replica_id=FOLLOWER)
        infos = [FetchInfo(*TP, 0, 1 << 20), FetchInfo(*STORE_TP, store_offset, 1 << 20)]
        done = manager.fetch_messages(params, infos)
        manager.fetch_purgatory.try_complete_else_watch(done)
        return done.read_result.results[0].records

    assert partition_bytes(end) == b""  # the follower's copy is complete (P is empty)
    marker = EndTxnMarker(commit=True, coordinator_epoch=0)
    assert manager.append_txn_marker(TP, 4, 0, marker) is ErrorCode.none
    assert store_log(broker).log_end_offset == end + 1  # the transaction's end
    assert partition_bytes(end) == b""
    assert partition_bytes(end + 1) != b""
    broker.shutdown()


def test_a_fenced_followers_parked_fetch_waits_for_what_it_may_read(
    tmp_path: Path, clock: Clock
) -> None:
    """Appends beyond a follower's fence do not answer its parked fetch (empty, at once)."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    hold(broker, [b"a"])  # store 0-1
    add_follower(broker)  # fence (0, 2)
    params = FetchParams(max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, replica_id=FOLLOWER)
    fetch = manager.fetch_messages(params, [FetchInfo(*TP, 0, 1 << 20)])  # no store copy
    assert manager.fetch_purgatory.try_complete_else_watch(fetch) is False
    plain = encode_record_batch(
        [Record(0, T0, b"k", b"x", ())], base_offset=0, base_timestamp=T0, max_timestamp=T0
    )
    manager.append_records({TP: plain}, 1)
    assert not fetch.completed
    assert manager.fetch_purgatory.watched(TP) == 1
    broker.shutdown()


def test_a_replicated_partition_holds_delayed_records(tmp_path: Path, clock: Clock) -> None:
    """Delayed records in a partition with several replicas are held (no broker switch)."""
    config = {"log.dirs": str(tmp_path), "broker.id": str(LEADER)}
    broker = Broker.open(build_config(config), clock_ms=clock)
    assert broker.admin_manager.create_topic("d", 1, 1, OPT_IN)[0].ok
    add_follower(broker)
    results, _ = broker.replica_manager.append_records({TP: delayed([b"a"], 1000)}, 1)
    assert results[TP].error is ErrorCode.none
    assert broker.replica_manager.delayed_delivery.held == 1
    broker.shutdown()


def test_a_follower_not_copying_the_store_is_not_held_back_nor_in_sync(
    tmp_path: Path, clock: Clock
) -> None:
    """A follower outside the ISR whose copy of the topic's configs has not opted in yet
    (it fetches P, not P's store) gets P unfenced: it does not stall. It joins the ISR only
    once it copies the store."""
    broker = open_broker(tmp_path, clock)
    manager = broker.replica_manager
    plain = encode_record_batch(
        [Record(0, T0, b"k", b"x", ())], base_offset=0, base_timestamp=T0, max_timestamp=T0
    )
    manager.append_records({TP: plain}, 1)  # P: x at 0
    partition = manager.partition(*TP)
    state = PartitionState(
        "d", 0, (LEADER, FOLLOWER), LEADER, partition.leader_epoch + 1, (LEADER,)
    )
    assert partition.make_leader(state, now_ms=T0) is ErrorCode.none
    hold(broker, [b"a"])
    clock.now = T0 + 1000
    manager.release_delayed()  # a at P offset 1, fenced on its intent
    hold(broker, [b"b"], delay_ms=60_000)  # held still
    assert partition.log_end_offset == 2

    def fetch(infos: list[FetchInfo]) -> list[bytes | None]:
        params = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, replica_id=FOLLOWER)
        done = manager.fetch_messages(params, infos)
        assert manager.fetch_purgatory.try_complete_else_watch(done) is True
        data = memoryview(done.read_result.results[0].records)
        return [
            record.value
            for position, header in iter_batches(data)
            for record in decode_records(data[position : position + header.size])
        ]

    assert fetch([FetchInfo(*TP, 0, 1 << 20)]) == [b"x", b"a"]  # not held back
    assert fetch([FetchInfo(*TP, 2, 1 << 20)]) == []  # caught up on P ...
    assert manager.isr_expands == 0 and partition.pending_isr is None  # ... not in sync
    start, end = store_log(broker).log_start_offset, store_log(broker).log_end_offset
    assert fetch_store(broker, start).records  # it copies the store now
    for _ in range(2):  # (P's position is taken before the store's of the same request)
        fetch([FetchInfo(*TP, 2, 1 << 20), FetchInfo(*STORE_TP, end, 1 << 20)])
    assert manager.isr_expands == 1  # asked for
    broker.shutdown()


def test_acks_all_of_a_held_batch_needs_min_insync_replicas(tmp_path: Path, clock: Clock) -> None:
    """As for ordinary records: refused when the ISR is below min.insync.replicas, and a
    parked acks=all answer gets NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrinks so."""
    broker = open_broker(tmp_path, clock, {**OPT_IN, "min.insync.replicas": "2"})
    manager = broker.replica_manager
    partition = manager.partition(*TP)

    def isr(members: tuple[int, ...], leader_epoch: int, partition_epoch: int) -> None:
        state = PartitionState(
            "d", 0, (LEADER, FOLLOWER), LEADER, leader_epoch, members, partition_epoch
        )
        assert partition.make_leader(state, now_ms=T0) is ErrorCode.none

    isr((LEADER,), 1, 1)
    results, _ = manager.append_records({TP: delayed([b"a"], 1000)}, -1)
    assert results[TP].error is ErrorCode.not_enough_replicas
    assert manager.delayed_delivery.held == 0
    isr((LEADER, FOLLOWER), 1, 2)
    results, produce = manager.append_records({TP: delayed([b"b"], 1000)}, -1)
    assert results[TP].error is ErrorCode.none and produce is not None
    assert manager.produce_purgatory.try_complete_else_watch(produce) is False
    isr((LEADER,), 1, 3)  # the follower leaves the ISR before it copied the held batch
    manager.produce_purgatory.check_and_complete(TP)
    assert produce.completed
    assert produce.results[TP].error is ErrorCode.not_enough_replicas_after_append
    broker.shutdown()


def test_the_store_replication_lag_metric(tmp_path: Path, clock: Clock) -> None:
    """kafka_server_delayeddelivery_storereplicationlag: store end - store high watermark."""
    broker = open_broker(tmp_path, clock)
    add_follower(broker)
    hold(broker, [b"a"])

    def lag() -> float:
        (family,) = [
            f
            for f in BrokerCollector(broker, "PLAINTEXT", {}).collect()
            if f.name == "kafka_server_delayeddelivery_storereplicationlag"
        ]
        (sample,) = family.samples
        assert sample.labels == {"topic": "d", "partition": "0"}
        return sample.value

    end = store_log(broker).log_end_offset
    fetch_store(broker, 0)
    assert lag() == end  # the follower has none of it yet
    fetch_store(broker, end)
    assert lag() == 0
    broker.shutdown()
