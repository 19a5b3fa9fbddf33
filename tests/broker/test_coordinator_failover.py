"""The coordinators follow the leadership of their internal topic's partitions, on three
brokers replicating over real sockets: the new leader of a `__consumer_offsets` /
`__transaction_state` partition loads it (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and serves
exactly what was acknowledged; the old one answers NOT_COORDINATOR (its parked JoinGroup
too); a load overtaken by a newer election installs nothing."""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio
import trio.testing
from cluster_fixtures import ManualClock, running_cluster
from kio.schema.errors import ErrorCode

from kafkalite.apis import add_offsets_to_txn, add_partitions_to_txn
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
from kafkalite.broker.replica_manager import OFFSETS_TOPIC, ReplicaManager
from kafkalite.broker.txn_coordinator_service import TXN_STATE_TOPIC
from kafkalite.coordinator import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    PartitionCommit,
    Protocol,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
    group_partition,
)
from kafkalite.coordinator.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkalite.storage.batch import TRANSACTIONAL_FLAG, iter_batches
from kafkalite.storage.control_batch import decode_marker
from kafkalite.storage.records import encode_batch
from kafkalite.txn.coordinator import TxnState
from tests.apis.harness import request_module

GROUP = "failover-group"
TID = "failover-txn"
WAIT_S = 30  # a bound on each wait: the tests wait on the brokers' tasks, not on time
OVERRIDES = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.min.isr": "2",
}


def commit_request(offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(GROUP, (PartitionCommit("t", 0, offset, -1, ""),), api_version=9)


async def commit(groups: GroupCoordinatorService, offset: int) -> list[ErrorCode]:
    response = await groups.commit_offsets(commit_request(offset))
    return [p.error for p in response.partitions]


def committed(groups: GroupCoordinatorService) -> int | None:
    value = groups.coordinator.committed(GROUP, TopicPartition("t", 0))
    return None if value is None else value.offset


async def park_join(groups: GroupCoordinatorService, answers: list[JoinGroupResponse]) -> None:
    answers.append(await groups.join_group(join_request()))


async def until(condition) -> None:
    """Let the other tasks (fetchers, loaders) run until `condition()` holds."""
    with trio.fail_after(WAIT_S):
        while not condition():
            await trio.lowlevel.checkpoint()


def test_the_new_group_coordinator_serves_exactly_the_acknowledged_offsets(tmp_path) -> None:
    async def main() -> None:
        async with running_cluster(tmp_path, 3, ManualClock(), **OVERRIDES) as (cluster, running):
            cluster.create_topic("t", [[1, 2, 3]])
            # The first use creates `__consumer_offsets`; its leader serves the group at once.
            running[1].broker.groups.check_group(GROUP)
            old = cluster.states[(OFFSETS_TOPIC, 0)].leader
            old_groups = running[old].broker.groups
            assert old_groups.check_group(GROUP) is ErrorCode.none
            for offset in range(1, 6):
                assert await commit(old_groups, offset) == [ErrorCode.none]
            # acks=all: every replica has the five commits before they are answered.
            ends = [
                b.broker.replica_manager.partition(OFFSETS_TOPIC, 0).log_end_offset
                for b in running.values()
            ]
            assert ends == [5, 5, 5]

            # A member parked in JoinGroup (the initial rebalance delay never passes here).
            joins: list[JoinGroupResponse] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: park_join(old_groups, joins))
                await until(lambda: len(old_groups._waiters) == 1)

                running[old].stop()
                first, second = (i for i in running if i != old)
                cluster.elect(OFFSETS_TOPIC, 0, first, (first, second))
                new_groups = running[first].broker.groups
                assert new_groups.check_group(GROUP) is ErrorCode.coordinator_load_in_progress
                assert old_groups.check_group(GROUP) is ErrorCode.not_coordinator
            assert [j.error for j in joins] == [ErrorCode.not_coordinator]
            assert await commit(old_groups, 99) == [ErrorCode.not_coordinator]
            assert committed(old_groups) is None  # unloaded

            await until(lambda: new_groups.check_group(GROUP) is ErrorCode.none)
            assert committed(new_groups) == 5
            assert await commit(new_groups, 6) == [ErrorCode.none]
            assert committed(new_groups) == 6
            assert new_groups.partitions.epoch(0) == 1

    trio.run(main)


def test_a_load_overtaken_by_a_newer_election_installs_nothing(tmp_path) -> None:
    async def main() -> None:
        async with running_cluster(tmp_path, 3, ManualClock(), **OVERRIDES) as (cluster, running):
            cluster.create_topic("t", [[1, 2, 3]])
            running[1].broker.groups.check_group(GROUP)
            old = cluster.states[(OFFSETS_TOPIC, 0)].leader
            for offset in range(1, 4):
                assert await commit(running[old].broker.groups, offset) == [ErrorCode.none]
            running[old].stop()
            first, second = (i for i in running if i != old)
            # `first` is elected, then loses it before its load ran.
            cluster.elect(OFFSETS_TOPIC, 0, first, (first, second))
            cluster.elect(OFFSETS_TOPIC, 0, second, (first, second))
            stale, current = running[first].broker.groups, running[second].broker.groups
            await until(lambda: current.check_group(GROUP) is ErrorCode.none)
            await until(lambda: not stale.runtime.loader.pending)
            assert stale.check_group(GROUP) is ErrorCode.not_coordinator
            assert committed(stale) is None
            assert (committed(current), current.partitions.epoch(0)) == (3, 2)

    trio.run(main)


async def produce_transactional(
    manager: ReplicaManager, pid: int, epoch: int, seq: int, count: int
) -> None:
    records = encode_batch(
        [(None, b"%d" % (seq + i)) for i in range(count)],
        timestamp=1_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL_FLAG,
    )
    results, delayed = manager.append_records({("t", 0): records}, -1)
    if delayed is not None:
        await complete_or_expire(manager.produce_purgatory, delayed, 30_000)
        results = delayed.results
    assert results[("t", 0)].error is ErrorCode.none


def test_the_new_transaction_coordinator_aborts_the_open_transaction_and_keeps_the_committed(
    tmp_path,
) -> None:
    async def main() -> None:
        async with running_cluster(tmp_path, 3, ManualClock(), **OVERRIDES) as (cluster, running):
            first_txn = running[1].broker.txn
            assert first_txn.ensure_state_topic() is ErrorCode.none
            old = cluster.states[(TXN_STATE_TOPIC, 0)].leader
            others = tuple(i for i in running if i != old)
            # The coordinator leads the data partition too: its markers go through the
            # marker sender to itself, as to any leader.
            cluster.create_topic("t", [[old, *others]])
            txn, data = running[old].broker.txn, running[old].broker.replica_manager
            assert txn.check_coordinator(TID) is ErrorCode.none
            init, error = await txn.call_and_wait(
                lambda c, now: c.init_producer_id(TID, 60_000, now)
            )
            assert (error, init.error, init.producer_epoch) == (ErrorCode.none, ErrorCode.none, 0)
            pid = init.producer_id

            async def begin(seq: int, count: int) -> None:
                added, error = await txn.call_and_wait(
                    lambda c, now: c.add_partitions(TID, pid, 0, [("t", 0)], now)
                )
                assert (added, error) == (ErrorCode.none, ErrorCode.none)
                await produce_transactional(data, pid, 0, seq, count)

            await begin(0, 3)
            ended, error = await txn.call_and_wait(lambda c, now: c.end_txn(TID, pid, 0, True, now))
            assert (ended, error) == (ErrorCode.none, ErrorCode.none)
            # EndTxn answers once PrepareCommit is committed; the markers follow.
            await until(lambda: txn.coordinator.describe(TID).state is TxnState.COMPLETE_COMMIT)
            await begin(3, 2)  # left open when its coordinator dies
            end = data.partition("t", 0).log_end_offset
            replicas = [running[i].broker.replica_manager for i in others]
            state_end = data.partition(TXN_STATE_TOPIC, 0).log_end_offset
            await until(
                lambda: all(
                    r.partition("t", 0).log_end_offset == end
                    and r.partition(TXN_STATE_TOPIC, 0).log_end_offset == state_end
                    for r in replicas
                )
            )

            running[old].stop()
            new = others[0]
            cluster.elect("t", 0, new, others)
            cluster.elect(TXN_STATE_TOPIC, 0, new, others)
            new_txn = running[new].broker.txn
            assert new_txn.check_coordinator(TID) is ErrorCode.coordinator_load_in_progress
            assert txn.check_coordinator(TID) is ErrorCode.not_coordinator
            assert txn.coordinator.describe(TID) is None  # unloaded
            await until(lambda: new_txn.check_coordinator(TID) is ErrorCode.none)

            # The client re-initialises with its transactional id: the open transaction is
            # aborted (CONCURRENT_TRANSACTIONS meanwhile), then it gets a bumped epoch.
            inits = []
            for attempt in range(2):
                result, error = await new_txn.call_and_wait(
                    lambda c, now: c.init_producer_id(TID, 60_000, now)
                )
                inits.append((error, result.error, result.producer_epoch))
                if attempt == 0:  # the abort's markers follow once PrepareAbort is committed
                    await until(
                        lambda: new_txn.coordinator.describe(TID).state is TxnState.COMPLETE_ABORT
                    )
            assert inits == [
                (ErrorCode.none, ErrorCode.concurrent_transactions, -1),
                (ErrorCode.none, ErrorCode.none, 2),
            ]

            partition = running[new].broker.replica_manager.partition("t", 0)
            await until(lambda: partition.high_watermark == partition.log_end_offset)
            log_bytes = partition.log.read(0, 1 << 20, partition.log_end_offset)
            layout = []
            for position, header in iter_batches(log_bytes):
                if header.is_control:
                    batch = memoryview(log_bytes)[position : position + header.size]
                    marker = decode_marker(batch)
                    layout.append(
                        ("commit" if marker.commit else "abort", marker.coordinator_epoch)
                    )
                else:
                    layout.append(("data", header.next_offset - header.base_offset))
            # The committed transaction, its marker in the old coordinator's epoch (0); the
            # open one, aborted by the new coordinator in its epoch (1).
            assert layout == [("data", 3), ("commit", 0), ("data", 2), ("abort", 1)]
            assert partition.last_stable_offset == partition.log_end_offset == 7
            read = partition.fetch_records(0, 1 << 20, isolation_level=1)
            assert [(a.producer_id, a.first_offset) for a in read.aborted_transactions] == [
                (pid, 4)
            ]

    trio.run(main)


def test_brokers_without_a_replica_find_the_internal_topics_without_creating_them(
    tmp_path, caplog
) -> None:
    """Each broker's first use used to try to create the topic again when it held no replica
    of it, and log "cannot create __consumer_offsets: already exists" as an ERROR."""

    async def main() -> None:
        single = {**OVERRIDES, "offsets.topic.replication.factor": "1"}
        single["transaction.state.log.replication.factor"] = "1"
        single["transaction.state.log.min.isr"] = "1"
        async with running_cluster(tmp_path, 3, ManualClock(), **single) as (cluster, running):
            answers = {i: each.broker.groups.check_group(GROUP) for i, each in running.items()}
            holder = cluster.states[(OFFSETS_TOPIC, 0)].leader
            assert answers == {
                i: ErrorCode.none if i == holder else ErrorCode.not_coordinator for i in running
            }
            found = {i: each.broker.txn.coordinator_for(TID) for i, each in running.items()}
            txn_holder = cluster.states[(TXN_STATE_TOPIC, 0)].leader
            assert found == {i: (ErrorCode.none, txn_holder) for i in running}
            assert len(cluster.topics) == 2

    trio.run(main)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_partitions_added_to_a_transaction_are_answered_only_once_replicated(tmp_path) -> None:
    """AddPartitionsToTxn and AddOffsetsToTxn answered before their `__transaction_state`
    write reached the other replicas (3-broker transactional chaos run, seed 5: a rolling
    restart moved the coordinator just after AddOffsetsToTxn, the new one did not know the
    group's partition, and TxnOffsetCommit failed its verification with INVALID_TXN_STATE,
    fatal to librdkafka). Kafka answers them after the acks=all write."""

    async def main() -> None:
        async with running_cluster(tmp_path, 3, ManualClock(), **OVERRIDES) as (cluster, running):
            assert running[1].broker.txn.ensure_state_topic() is ErrorCode.none
            old = cluster.states[(TXN_STATE_TOPIC, 0)].leader
            others = tuple(i for i in running if i != old)
            cluster.create_topic("t", [[old, *others]])
            broker = running[old].broker
            init, error = await broker.txn.call_and_wait(
                lambda c, now: c.init_producer_id(TID, 60_000, now)
            )
            pid = init.producer_id

            async def answer(api: ApiHandler, request):
                return await api.handle(RequestContext(broker, api.api_key, 3, 1, "tests"), request)

            def state_ends() -> list[int]:
                return [
                    each.broker.replica_manager.partition(TXN_STATE_TOPIC, 0).log_end_offset
                    for each in running.values()
                ]

            added = await answer(
                add_partitions_to_txn.API,
                request_module(24, 3).AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=TID,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=0,
                    v3_and_below_topics=(
                        request_module(24, 3).AddPartitionsToTxnTopic(name="t", partitions=(0,)),
                    ),
                ),
            )
            partition_errors = [
                p.partition_error_code
                for topic in added.results_by_topic_v3_and_below
                for p in topic.results_by_partition
            ]
            assert partition_errors == [ErrorCode.none]
            first_ends = state_ends()
            assert len(set(first_ends)) == 1, first_ends  # every replica has it when answered

            offsets = await answer(
                add_offsets_to_txn.API,
                request_module(25, 3).AddOffsetsToTxnRequest(
                    transactional_id=TID, producer_id=pid, producer_epoch=0, group_id=GROUP
                ),
            )
            assert offsets.error_code is ErrorCode.none
            ends = state_ends()
            assert len(set(ends)) == 1 and ends[0] > first_ends[0], ends

            # The coordinator dies at once: its successor knows both partitions.
            running[old].stop()
            new = others[0]
            cluster.elect(TXN_STATE_TOPIC, 0, new, others)
            new_txn = running[new].broker.txn
            await until(lambda: new_txn.check_coordinator(TID) is ErrorCode.none)
            offsets_tp = (OFFSETS_TOPIC, group_partition(GROUP, 1))  # one partition
            verified, _ = new_txn.call(
                lambda c, now: c.verify_partitions(TID, pid, 0, [("t", 0), offsets_tp])
            )
            assert verified == {("t", 0): ErrorCode.none, offsets_tp: ErrorCode.none}

    trio.run(main)


# -- answers only what is committed (issue 22): a leader change right after an answer ------


def stop_following(running, tp: tuple[str, int]) -> None:
    """The followers of `tp` stop fetching it, so nothing new reaches them (the leader's
    ISR stays whole: the test clock never passes replica.lag.time.max.ms)."""
    for each in running.values():
        manager = each.broker.replica_manager
        partition = manager.partition(*tp)
        if partition is not None and not partition.is_leader:
            manager.fetchers.remove_partition(tp)


def join_request(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        protocol_type="consumer",
        protocols=(Protocol("range", b""),),
        session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000,
        api_version=3,  # before KIP-394: parked at once, no member id round trip
        client_id="client",
        client_host="/127.0.0.1",
        group_instance_id=None,
    )


async def joined_member(groups: GroupCoordinatorService) -> JoinGroupResponse:
    joined = await groups.join_group(join_request())
    assert joined.error is ErrorCode.none
    return joined


def sync_request(joined: JoinGroupResponse) -> SyncGroupRequest:
    return SyncGroupRequest(
        GROUP, joined.generation_id, joined.member_id, assignments={joined.member_id: b"p0"}
    )


def heartbeat_request() -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        CONSUMER_GROUP,
        member_id="member-1",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        owned=(),
    )


GROUP_OVERRIDES = {**OVERRIDES, "group.initial.rebalance.delay.ms": "0"}
CONSUMER_GROUP = "failover-consumer-group"


@asynccontextmanager
async def group_with_a_member(tmp_path):
    """Three brokers; the group's coordinator (`old`) has a member joined in generation 1
    (replicated)."""
    async with running_cluster(tmp_path, 3, ManualClock(), **GROUP_OVERRIDES) as (
        cluster,
        running,
    ):
        cluster.create_topic("t", [[1, 2, 3]])
        running[1].broker.groups.check_group(GROUP)
        old = cluster.states[(OFFSETS_TOPIC, 0)].leader
        joined = await joined_member(running[old].broker.groups)
        yield cluster, running, old, joined


def test_answers_wait_until_the_group_records_are_replicated(tmp_path) -> None:
    """SyncGroup and ConsumerGroupHeartbeat are answered only once their records are
    committed: killed before that, the coordinator answers NOT_COORDINATOR, and the new
    one has nothing they were not told (no assignment, no member epoch)."""

    async def main() -> None:
        async with group_with_a_member(tmp_path) as (cluster, running, old, joined):
            groups = running[old].broker.groups
            stop_following(running, (OFFSETS_TOPIC, 0))
            offsets = running[old].broker.replica_manager.partition(OFFSETS_TOPIC, 0)
            written = offsets.log_end_offset
            synced: list[SyncGroupResponse] = []
            beats: list[ConsumerGroupHeartbeatResponse] = []

            async def sync() -> None:
                synced.append(await groups.sync_group(sync_request(joined)))

            async def beat() -> None:
                beats.append(await groups.consumer_group_heartbeat(heartbeat_request()))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sync)
                nursery.start_soon(beat)
                # Both wrote their records; neither may answer before they replicate.
                await until(lambda: offsets.log_end_offset > written + 1)
                await trio.testing.wait_all_tasks_blocked()
                assert (synced, beats) == ([], [])
                running[old].stop()
                first, second = (i for i in running if i != old)
                cluster.elect(OFFSETS_TOPIC, 0, first, (first, second))
            assert [s.error for s in synced] == [ErrorCode.not_coordinator]
            assert [b.error for b in beats] == [ErrorCode.not_coordinator]

            new_groups = running[first].broker.groups
            await until(lambda: new_groups.check_group(GROUP) is ErrorCode.none)
            # A classic group is written at SyncGroup (as Kafka's storeGroup): the member was
            # told no assignment and the new coordinator has none; it rejoins.
            assert new_groups.coordinator.group(GROUP) is None
            described = new_groups.coordinator.consumer_group_describe(CONSUMER_GROUP)
            assert described.error is ErrorCode.group_id_not_found

    trio.run(main)


def test_the_new_group_coordinator_has_what_the_clients_were_told(tmp_path) -> None:
    """SyncGroup, OffsetCommit and ConsumerGroupHeartbeat answered, then the coordinator
    killed at once: the new one has the generation, the assignment, the offsets and the
    member epoch the clients were told."""

    async def main() -> None:
        async with group_with_a_member(tmp_path) as (cluster, running, old, joined):
            groups = running[old].broker.groups
            synced = await groups.sync_group(sync_request(joined))
            assert (synced.error, synced.assignment) == (ErrorCode.none, b"p0")
            request = OffsetCommitRequest(
                GROUP,
                (PartitionCommit("t", 0, 42, -1, ""),),
                api_version=9,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
            )
            committed_now = await groups.commit_offsets(request)
            assert [p.error for p in committed_now.partitions] == [ErrorCode.none]
            beat = await groups.consumer_group_heartbeat(heartbeat_request())
            assert (beat.error, beat.member_epoch) == (ErrorCode.none, 1)

            running[old].stop()  # right after the answers
            first, second = (i for i in running if i != old)
            cluster.elect(OFFSETS_TOPIC, 0, first, (first, second))
            new_groups = running[first].broker.groups
            await until(lambda: new_groups.check_group(GROUP) is ErrorCode.none)
            group = new_groups.coordinator.group(GROUP)
            assert group is not None and group.generation_id == joined.generation_id
            assert group.members[joined.member_id].assignment == b"p0"
            assert committed(new_groups) == 42
            described = new_groups.coordinator.consumer_group_describe(CONSUMER_GROUP)
            assert [m.member.member_epoch for m in described.members] == [1]

    trio.run(main)


def test_a_marker_not_replicated_before_a_leader_change_is_written_to_the_new_leader(
    tmp_path,
) -> None:
    """The coordinator leads every partition of its transaction; a follower is made leader
    right after EndTxn, before the marker reached it: the marker goes to the new leader and
    read_committed consumers see the commit (no stall at the transaction's start)."""

    async def main() -> None:
        async with running_cluster(tmp_path, 3, ManualClock(), **OVERRIDES) as (cluster, running):
            running[1].broker.txn.ensure_state_topic()
            old = cluster.states[(TXN_STATE_TOPIC, 0)].leader
            others = tuple(i for i in running if i != old)
            cluster.create_topic("t", [[old, *others]])
            txn, data = running[old].broker.txn, running[old].broker.replica_manager
            init, _ = await txn.call_and_wait(lambda c, now: c.init_producer_id(TID, 60_000, now))
            pid = init.producer_id
            added, error = await txn.call_and_wait(
                lambda c, now: c.add_partitions(TID, pid, 0, [("t", 0)], now)
            )
            assert (added, error) == (ErrorCode.none, ErrorCode.none)
            await produce_transactional(data, pid, 0, 0, 3)  # acks=all: every replica has it
            stop_following(running, ("t", 0))
            ended, error = await txn.call_and_wait(lambda c, now: c.end_txn(TID, pid, 0, True, now))
            assert (ended, error) == (ErrorCode.none, ErrorCode.none)
            await until(lambda: data.partition("t", 0).log_end_offset == 4)  # marker, local

            new = others[0]
            cluster.elect("t", 0, new, others)  # right after EndTxn, without the marker
            await until(lambda: txn.coordinator.describe(TID).state is TxnState.COMPLETE_COMMIT)
            partition = running[new].broker.replica_manager.partition("t", 0)
            await until(lambda: partition.last_stable_offset == partition.log_end_offset)
            read = partition.fetch_records(0, 1 << 20, isolation_level=1)
            assert read.aborted_transactions == ()
            log_bytes = partition.log.read(0, 1 << 20, partition.log_end_offset)
            controls = [h for _, h in iter_batches(log_bytes) if h.is_control]
            assert len(controls) == 1 and partition.log_end_offset == 4

    trio.run(main)


def test_a_write_refused_outright_leaves_nothing_in_memory(tmp_path) -> None:
    """A commit whose append is refused (the ISR below min.insync.replicas) fails and
    is not served afterwards: the partition is reloaded from its log, as Kafka reverts to
    its last written snapshot."""

    async def main() -> None:
        overrides = {**OVERRIDES, "min.insync.replicas": "2"}
        async with running_cluster(tmp_path, 3, ManualClock(), **overrides) as (cluster, running):
            cluster.create_topic("t", [[1, 2, 3]])
            running[1].broker.groups.check_group(GROUP)
            old = cluster.states[(OFFSETS_TOPIC, 0)].leader
            groups = running[old].broker.groups
            assert await commit(groups, 5) == [ErrorCode.none]
            cluster.elect(OFFSETS_TOPIC, 0, old, (old,))  # the followers left the ISR
            assert await commit(groups, 6) == [ErrorCode.coordinator_not_available]
            await until(lambda: groups.check_group(GROUP) is ErrorCode.none)
            assert committed(groups) == 5
            # Reloaded in the leader epoch the partition has now.
            assert groups.partitions.epoch(0) == cluster.states[(OFFSETS_TOPIC, 0)].leader_epoch

    trio.run(main)
