"""Replication between brokers' ReplicaManagers over real sockets: the followers' fetcher
tasks pull from the leader (Fetch as a replica), the leader tracks their positions, moves the
high watermark, answers acks=all and changes the ISR through the shared cluster metadata."""

from __future__ import annotations

import logging
from dataclasses import replace

import trio
from cluster_fixtures import ManualClock, running_cluster
from kio.schema.errors import ErrorCode
from partition_fixtures import batch

from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.replica_manager import ReplicaManager

TP = ("t", 0)
LAG_MS = 10_000
WAIT_S = 30  # a bound on every wait for replication: the tests wait on events, not time


def log_bytes(manager: ReplicaManager) -> bytes:
    partition = manager.partition(*TP)
    assert partition is not None
    return partition.log.read(0, 1 << 30, partition.log_end_offset)


async def until(condition, running) -> None:
    """Wait for fetch responses until `condition()` holds."""
    with trio.fail_after(WAIT_S):
        while not condition():
            async with trio.open_nursery() as nursery:
                for each in running.values():
                    fetchers = each.broker.fetchers

                    async def progress(fetchers=fetchers) -> None:
                        await fetchers.wait_for_progress()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(progress)


async def produce(manager: ReplicaManager, count: int, acks: int = -1, timeout_ms: int = 30_000):
    results, delayed = manager.append_records({TP: batch(count)}, acks)
    if delayed is not None:
        await complete_or_expire(manager.produce_purgatory, delayed, timeout_ms)
        results = delayed.results
    return results[TP]


def test_followers_copy_the_leaders_log_and_acks_all_waits_for_them(tmp_path) -> None:
    clock = ManualClock()

    async def main() -> None:
        async with running_cluster(tmp_path, 3, clock) as (cluster, running):
            leader = running[1].broker.replica_manager
            cluster.create_topic("t", [[1, 2, 3]])
            assert cluster.states[TP].leader == 1
            followers = [running[2].broker.replica_manager, running[3].broker.replica_manager]
            for count in (3, 1, 5):
                answer = await produce(leader, count)
                assert answer.error is ErrorCode.none
                # Answered only once both followers had it (the ISR's smallest LEO).
                end = answer.base_offset + count
                assert [f.partition(*TP).log_end_offset >= end for f in followers] == [True] * 2
            await until(
                lambda: all(f.partition(*TP).high_watermark == 9 for f in followers), running
            )
            assert leader.partition(*TP).high_watermark == 9
            assert [log_bytes(f) for f in followers] == [log_bytes(leader)] * 2
            entries = leader.partition(*TP).log.leader_epoch_cache.entries
            assert [f.partition(*TP).log.leader_epoch_cache.entries for f in followers] == [
                entries
            ] * 2

    trio.run(main)


def test_a_stopped_follower_leaves_the_isr_after_the_max_lag(tmp_path) -> None:
    clock = ManualClock()
    overrides = {"replica.lag.time.max.ms": str(LAG_MS), "min.insync.replicas": "2"}

    async def main() -> None:
        async with running_cluster(tmp_path, 2, clock, **overrides) as (cluster, running):
            leader = running[1].broker.replica_manager
            cluster.create_topic("t", [[1, 2]])
            assert (await produce(leader, 2)).error is ErrorCode.none
            running[2].stop()
            # Behind now, and not caught up for the max lag: not yet at LAG_MS, then out.
            leader.append_records({TP: batch(1)}, 1)
            clock.now_ms += LAG_MS
            leader.maybe_shrink_isrs()
            assert cluster.states[TP].isr == (1, 2)
            clock.now_ms += 1
            leader.maybe_shrink_isrs()
            assert cluster.states[TP].isr == (1,)
            assert cluster.isr_changes == [("t", 0, (1,))]
            assert (leader.isr_shrinks, leader.isr_expands) == (1, 0)
            partition = leader.partition(*TP)
            assert (partition.isr, partition.pending_isr, partition.high_watermark) == (
                [1],
                None,
                3,
            )
            # min.insync.replicas=2 of RF 2: refused before appending.
            refused = await produce(leader, 1)
            assert (refused.error, partition.log_end_offset) == (
                ErrorCode.not_enough_replicas,
                3,
            )
            # With min.insync.replicas=1 for the topic, the leader alone acknowledges.
            leader.metadata.set_topic_configs("t", {"min.insync.replicas": "1"})
            leader.on_topic_configs_changed("t", {"min.insync.replicas": "1"})
            accepted = await produce(leader, 1)
            assert (accepted.error, accepted.base_offset, partition.high_watermark) == (
                ErrorCode.none,
                3,
                4,
            )

    trio.run(main)


def test_a_follower_catching_up_rejoins_the_isr(tmp_path) -> None:
    clock = ManualClock()

    async def main() -> None:
        async with running_cluster(tmp_path, 2, clock) as (cluster, running):
            leader = running[1].broker.replica_manager
            cluster.create_topic("t", [[1, 2]])
            cluster.alter_isr("t", 0, [1], 0, cluster.states[TP].partition_epoch)
            assert (await produce(leader, 4, acks=1)).error is ErrorCode.none
            await until(lambda: cluster.states[TP].isr == (1, 2), running)
            assert cluster.isr_changes == [("t", 0, (1,)), ("t", 0, (1, 2))]
            assert (leader.isr_shrinks, leader.isr_expands) == (0, 1)  # the shrink was by hand
            follower = running[2].broker.replica_manager
            await until(lambda: follower.partition(*TP).log_end_offset == 4, running)
            assert log_bytes(follower) == log_bytes(leader)

    trio.run(main)


def test_a_deposed_leader_truncates_its_unreplicated_suffix(tmp_path, caplog) -> None:
    clock = ManualClock()
    caplog.set_level(logging.INFO, logger="kafkalite.replica_manager")

    async def main() -> None:
        async with running_cluster(tmp_path, 2, clock) as (cluster, running):
            old = running[1].broker.replica_manager
            new = running[2].broker.replica_manager
            cluster.create_topic("t", [[1, 2]])
            assert (await produce(old, 3)).error is ErrorCode.none
            # Appended on the old leader only (acks=1), then broker 2 is elected before any
            # fetch: offsets 3-4 exist on broker 1 alone.
            old.append_records({TP: batch(2)}, 1)
            assert old.partition(*TP).log_end_offset == 5
            cluster.elect("t", 0, leader=2, isr=(2,))
            assert (await produce(new, 4)).error is ErrorCode.none  # ISR {2}: acked at once
            await until(lambda: cluster.states[TP].isr == (2, 1), running)
            await until(lambda: old.partition(*TP).log_end_offset == 7, running)
            assert log_bytes(old) == log_bytes(new)
            assert old.partition(*TP).log.leader_epoch_cache.entries == (
                new.partition(*TP).log.leader_epoch_cache.entries
            )
            # One line per broker for the leader change (issue 12's notable events).
            changes = [r.getMessage() for r in caplog.records if "at epoch 1 (was 1" in r.message]
            assert changes == ["t-0: leader 2 at epoch 1 (was 1 at epoch 0), ISR [2]"] * 2

    trio.run(main)


def test_a_follower_elected_after_its_leader_stopped_deduplicates_the_retry(tmp_path) -> None:
    """Issue 13 point 4: an idempotent batch the leader wrote and its followers copied over the
    fetch path, never acknowledged; the leader stops, a follower is elected and gets the
    producer's retry: it answers the original offset and writes nothing."""
    clock = ManualClock()

    async def main() -> None:
        async with running_cluster(tmp_path, 3, clock) as (cluster, running):
            cluster.create_topic("t", [[1, 2, 3]])
            old, new = running[1].broker.replica_manager, running[2].broker.replica_manager
            for sequence in range(0, 6, 2):
                results, _ = old.append_records({TP: batch(2, 7, sequence)}, 1)
                assert results[TP].error is ErrorCode.none
            retried = batch(2, producer_id=7, base_sequence=6)
            old.append_records({TP: retried}, 1)
            await until(lambda: new.partition(*TP).log_end_offset == 8, running)
            running[1].stop()
            cluster.elect("t", 0, leader=2, isr=(2, 3))
            results, _ = new.append_records({TP: retried}, 1)
            assert (results[TP].error, results[TP].base_offset) == (ErrorCode.none, 6)
            assert new.partition(*TP).log_end_offset == 8

    trio.run(main)


def test_a_broker_holds_only_its_replicas_and_deletes_one_it_loses(tmp_path) -> None:
    clock = ManualClock()

    async def main() -> None:
        async with running_cluster(tmp_path, 2, clock) as (cluster, running):
            first, second = (running[i].broker.replica_manager for i in (1, 2))
            cluster.create_topic("t", [[1], [2]])
            assert sorted(first.topics["t"].partitions) == [0]
            assert sorted(second.topics["t"].partitions) == [1]
            log_dir = second.partition("t", 1).log.dir
            assert log_dir.exists()
            # Moved to broker 1 alone: broker 2 drops its replica and its files.
            state = cluster.states[("t", 1)]
            cluster.announce(replace(state, replicas=(1,), leader=1, leader_epoch=1, isr=(1,)))
            assert "t" not in second.topics and not log_dir.exists()
            assert sorted(first.topics["t"].partitions) == [0, 1]

    trio.run(main)


def test_a_new_replica_behind_the_leaders_log_start_starts_there(tmp_path) -> None:
    clock = ManualClock()

    async def main() -> None:
        async with running_cluster(tmp_path, 2, clock) as (cluster, running):
            leader, joining = (running[i].broker.replica_manager for i in (1, 2))
            cluster.create_topic("t", [[1]])
            assert cluster.states[TP].replicas == (1,)
            leader.append_records({TP: batch(2)}, 1)
            leader.append_records({TP: batch(3)}, 1)
            assert leader.delete_records(TP, 2) == (ErrorCode.none, 2)
            # Broker 2 becomes a replica: its empty log ends before the leader's log start.
            state = cluster.states[TP]
            cluster.announce(replace(state, replicas=(1, 2), partition_epoch=1))
            await until(lambda: cluster.states[TP].isr == (1, 2), running)
            partition = joining.partition(*TP)
            assert (partition.log_start_offset, partition.log_end_offset) == (2, 5)
            start = leader.partition(*TP)
            assert partition.log.read(2, 1 << 20, 5) == start.log.read(2, 1 << 20, 5)

    trio.run(main)
