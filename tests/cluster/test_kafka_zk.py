"""The ZooKeeper building blocks of the cluster (kafkalite.cluster.kafka_zk) against a real
ZooKeeper: broker registration, cluster id, controller election and fencing, conditional
partition-state writes, producer id blocks, session expiry and ZooKeeper restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable

import pytest
import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import (
    BrokerIdInUse,
    ControllerEpoch,
    ControllerMoved,
    KafkaZkClient,
    StalePartitionState,
    keep_broker_registered,
)
from kafkalite.cluster.zk_client import NoNode, SessionState, WatchEvent, ZkClient
from kafkalite.cluster.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.slow
WAIT = 30  # seconds: the bound of every wait on a watch or state change
WAITING = "taken for its previous run: waiting up to"


def broker_info(broker_id: int, rack: str | None = None) -> zd.BrokerInfo:
    endpoint = zd.Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
    return zd.BrokerInfo(broker_id, (endpoint,), rack=rack, timestamp_ms=1)


def test_cluster_id_is_created_once_and_read_by_all(zk_connect: str) -> None:
    async def main() -> list[str]:
        ids: list[str] = []

        async def join(proposal: str) -> None:
            async with ZkClient.open(zk_connect) as zk:
                kafka_zk = KafkaZkClient(zk)
                await kafka_zk.create_top_level_paths()
                ids.append(await kafka_zk.get_or_create_cluster_id(proposal))

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(join, f"proposal-{n}")
        async with ZkClient.open(zk_connect) as zk:
            stored = zd.decode_cluster_id((await zk.get(zd.CLUSTER_ID))[0])
            assert await zk.children("/config") == [
                "brokers",
                "changes",
                "clients",
                "ips",
                "topics",
                "users",
            ]
        return [stored, *ids]

    stored, *ids = trio.run(main)
    assert ids == [stored] * 3
    assert stored in {"proposal-0", "proposal-1", "proposal-2"}


def test_broker_registration_is_ephemeral_and_unique_per_id(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as observer_zk:
            observer = KafkaZkClient(observer_zk)
            await observer.create_top_level_paths()
            async with ZkClient.open(zk_connect) as zk1, ZkClient.open(zk_connect) as zk2:
                one, two = KafkaZkClient(zk1), KafkaZkClient(zk2)
                epoch = await one.register_broker(broker_info(1, rack="r1"))
                assert epoch == (await observer_zk.get("/brokers/ids/1"))[1].czxid
                assert await one.register_broker(broker_info(1, rack="r1")) == epoch  # ours
                await two.register_broker(broker_info(2))
                elsewhere = zd.BrokerInfo(1, (zd.Endpoint("PLAINTEXT", "10.0.0.1", 9092),))
                with pytest.raises(BrokerIdInUse, match="broker id 1 is registered"):
                    await two.register_broker(elsewhere)  # another live broker: at once
                live = await observer.live_brokers()
                assert live == {1: broker_info(1, rack="r1"), 2: broker_info(2)}
                _, left = await observer_zk.children_watch(zd.BROKER_IDS)
            with trio.fail_after(WAIT):
                assert await left.wait() == WatchEvent("child", zd.BROKER_IDS)
            assert await observer.live_brokers() == {}

    trio.run(main)


def test_the_registration_of_a_previous_run_is_waited_for(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Same endpoints: taken for this broker's previous run, whose session is about to expire
    (here: is closed), so the broker waits for the znode to go and registers."""

    async def main() -> None:
        async with ZkClient.open(zk_connect, 4000) as zk:
            restarted = KafkaZkClient(zk)
            await restarted.create_top_level_paths()
            previous = ZkClient(zk_connect, 4000)
            await previous.start()
            try:
                await KafkaZkClient(previous).register_broker(broker_info(1))
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(restarted.register_broker, broker_info(1))
                    with trio.fail_after(WAIT):
                        while WAITING not in caplog.text:
                            await trio.sleep(0.01)  # polling the captured log
                    await previous.close()  # as when ZooKeeper expires its session
            finally:
                await previous.close()
            assert (await zk.exists(zd.broker_path(1))).ephemeral_owner == zk.session_id
        assert caplog.text.count(WAITING) == 1

    trio.run(main)


def test_a_live_registration_with_our_endpoints_is_refused_after_the_wait(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk1, ZkClient.open(zk_connect, 1000) as zk2:
            live = KafkaZkClient(zk1)
            await live.create_top_level_paths()
            await live.register_broker(broker_info(1))
            started = trio.current_time()
            with pytest.raises(BrokerIdInUse, match="did not expire within 3500 ms"):
                await KafkaZkClient(zk2).register_broker(broker_info(1))
            assert trio.current_time() - started >= 3.5
        assert caplog.text.count(WAITING) == 1

    trio.run(main)


def test_one_controller_is_elected_and_a_deposed_one_is_fenced(zk_connect: str) -> None:
    async def main() -> None:
        async with (
            ZkClient.open(zk_connect) as zk1,
            ZkClient.open(zk_connect) as zk2,
            ZkClient.open(zk_connect) as zk3,
        ):
            brokers = {1: KafkaZkClient(zk1), 2: KafkaZkClient(zk2), 3: KafkaZkClient(zk3)}
            results: dict[int, ControllerEpoch | None] = {}

            async def elect(broker_id: int) -> None:
                results[broker_id] = await brokers[broker_id].try_become_controller(broker_id)

            async with trio.open_nursery() as nursery:
                for broker_id in brokers:
                    nursery.start_soon(elect, broker_id)
            [(winner, first)] = [(b, e) for b, e in results.items() if e is not None]
            assert first.epoch == 1
            assert await brokers[1].controller_id() == winner
            assert await brokers[1].controller_epoch() == first

            # The controller writes a partition's first state under its epoch.
            tp = ("orders", 0)
            state = zd.PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
            await brokers[winner].create_partition_state(*tp, state, first)

            # The losers watch /controller; the winner's session ends (as if it crashed).
            loser = min(b for b in brokers if b != winner)
            stat, gone = await brokers[loser].zk.exists_watch(zd.CONTROLLER)
            assert stat is not None
            winner_states = brokers[winner].zk.state_changes()
            await brokers[winner].zk.expire_session()
            with trio.fail_after(WAIT):
                assert await gone.wait() == WatchEvent("deleted", zd.CONTROLLER)
                while await winner_states.receive() is not SessionState.LOST:
                    pass
                assert await winner_states.receive() is SessionState.CONNECTED  # new session
            second = await brokers[loser].try_become_controller(loser)
            assert second is not None and second.epoch == 2
            assert await brokers[winner].try_become_controller(winner) is None

            # The deposed controller's conditional write is refused: nothing changes.
            current = await brokers[loser].partition_state(*tp)
            assert current is not None and current.zk_version == 0
            stale = zd.PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
            with pytest.raises(ControllerMoved):
                await brokers[winner].set_partition_state(*tp, stale, 0, controller=first)
            assert await brokers[loser].partition_state(*tp) == current
            new = zd.PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=2)
            assert await brokers[loser].set_partition_state(*tp, new, 0, controller=second) == 1
            assert (await brokers[winner].partition_state(*tp)).state == new

            # Resigning with a superseded epoch leaves the current controller in place.
            await brokers[winner].resign_controller(first)
            assert await brokers[winner].controller_id() == loser
            await brokers[loser].resign_controller(second)
            assert await brokers[winner].controller_id() is None

    trio.run(main)


def test_stale_partition_state_writer_learns_it_is_fenced(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk_a, ZkClient.open(zk_connect) as zk_b:
            a, b = KafkaZkClient(zk_a), KafkaZkClient(zk_b)
            controller = await a.try_become_controller(1)
            assert controller is not None
            initial = zd.PartitionState(leader=1, leader_epoch=3, isr=(1, 2, 3), controller_epoch=1)
            await a.create_partition_state("t", 2, initial, controller)
            read_a, read_b = await a.partition_state("t", 2), await b.partition_state("t", 2)
            assert read_a == read_b and read_a is not None and read_a.zk_version == 0
            # Both leaders-to-be shrink the ISR from what they read; the second one is stale.
            shrunk = zd.PartitionState(1, 3, (1, 2), 1)
            assert await a.set_partition_state("t", 2, shrunk, read_a.zk_version) == 1
            with pytest.raises(StalePartitionState, match="no longer at version 0"):
                await b.set_partition_state("t", 2, zd.PartitionState(1, 3, (1, 3), 1), 0)
            assert (await b.partition_state("t", 2)) == (await a.partition_state("t", 2)) and (
                await a.partition_state("t", 2)
            ).state == shrunk

    trio.run(main)


def test_producer_id_blocks_are_unique_across_concurrent_brokers(zk_connect: str) -> None:
    per_broker, brokers = 5, 3

    async def main() -> list[zd.ProducerIdBlock]:
        blocks: list[zd.ProducerIdBlock] = []

        async def allocate(broker_id: int) -> None:
            async with ZkClient.open(zk_connect) as zk:
                kafka_zk = KafkaZkClient(zk)
                for _ in range(per_broker):
                    blocks.append(await kafka_zk.allocate_producer_id_block(broker_id))

        async with trio.open_nursery() as nursery:
            for broker_id in range(brokers):
                nursery.start_soon(allocate, broker_id)
        async with ZkClient.open(zk_connect) as zk:
            latest = zd.ProducerIdBlock.decode((await zk.get(zd.PRODUCER_ID_BLOCK))[0])
            assert latest.first == 1000 * (per_broker * brokers - 1)
        return blocks

    blocks = trio.run(main)
    assert sorted(block.first for block in blocks) == [
        1000 * n for n in range(per_broker * brokers)
    ]
    assert all(block.size == 1000 for block in blocks)
    for broker_id in range(brokers):
        assert sum(block.broker_id == broker_id for block in blocks) == per_broker


def test_configs_are_written_and_announced(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            await kafka_zk.set_entity_config("topics", "orders", {"retention.ms": "1000"})
            await kafka_zk.set_entity_config("brokers", zd.DEFAULT_ENTITY, {"x": "1"})
            assert await kafka_zk.entity_config("topics", "orders") == {"retention.ms": "1000"}
            assert await kafka_zk.entity_config("topics", "missing") == {}
            changes = await zk.children(zd.CONFIG_CHANGES)
            assert changes == ["config_change_0000000000", "config_change_0000000001"]
            announced = [
                zd.decode_config_change((await zk.get(f"{zd.CONFIG_CHANGES}/{c}"))[0])
                for c in changes
            ]
            assert announced == [("topics", "orders"), ("brokers", "<default>")]
            topic_id = uuid.uuid4()
            assignment = zd.TopicAssignment({0: zd.ReplicaAssignment((1, 2))}, topic_id)
            await kafka_zk.create_topic("orders", assignment)
            assert await kafka_zk.topic_assignment("orders") == assignment
            assert await kafka_zk.topics() == ["orders"]
            await kafka_zk.mark_topic_for_deletion("orders")
            await kafka_zk.mark_topic_for_deletion("orders")
            assert await zk.children(zd.DELETE_TOPICS) == ["orders"]

    trio.run(main)


def test_a_config_another_broker_creates_between_set_and_create_is_overwritten(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two brokers creating `__consumer_offsets` at once: both found no /config/topics znode,
    the second create failed with NodeExists and was logged as an ERROR ("ZooKeeper write
    create topic __consumer_offsets failed"); it sets the znode instead."""

    async def main() -> None:
        async with ZkClient.open(zk_connect) as other, ZkClient.open(zk_connect) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            path = zd.config_path("topics", "raced")
            set_znode = zk.set

            async def set_losing_the_race(at: str, data: bytes, version: int = -1) -> object:
                try:
                    return await set_znode(at, data, version)
                except NoNode:  # the other broker creates it just after this answer
                    await other.create(path, zd.encode_config({"x": "1"}), make_parents=True)
                    raise

            monkeypatch.setattr(zk, "set", set_losing_the_race)
            await kafka_zk.set_entity_config("topics", "raced", {"retention.ms": "5"})
            assert await kafka_zk.entity_config("topics", "raced") == {"retention.ms": "5"}

    trio.run(main)


def test_registration_comes_back_after_session_expiry(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as observer, ZkClient.open(zk_connect, 4000) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            async with trio.open_nursery() as nursery:
                first_epoch = await nursery.start(keep_broker_registered, kafka_zk, broker_info(7))
                _, _, gone = await observer.get_watch(zd.broker_path(7))
                changes = zk.state_changes()
                await zk.expire_session()
                with trio.fail_after(WAIT):
                    assert await gone.wait() == WatchEvent("deleted", "/brokers/ids/7")
                    while await changes.receive() is not SessionState.CONNECTED:
                        pass
                    stat = None
                    while stat is None:  # re-registered by the task once connected
                        stat, back = await observer.exists_watch(zd.broker_path(7))
                        if stat is None:
                            await back.wait()
                assert stat.ephemeral_owner == zk.session_id
                assert stat.czxid > first_epoch
                nursery.cancel_scope.cancel()

    trio.run(main)


def test_registration_survives_a_zookeeper_restart(
    zookeeper_factory: Callable[[], ZooKeeperServer],
) -> None:
    server = zookeeper_factory()

    async def main() -> None:
        async with ZkClient.open(server.connect_string, session_timeout_ms=10_000) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            async with trio.open_nursery() as nursery:
                await nursery.start(keep_broker_registered, kafka_zk, broker_info(1))
                changes = zk.state_changes()
                await trio.to_thread.run_sync(server.kill)
                with trio.fail_after(WAIT):
                    assert await changes.receive() is SessionState.SUSPENDED
                await trio.to_thread.run_sync(server.start)
                with trio.fail_after(WAIT):
                    assert await changes.receive() is SessionState.CONNECTED
                assert (await zk.exists(zd.broker_path(1))).ephemeral_owner == zk.session_id
                assert list(await kafka_zk.live_brokers()) == [1]
                nursery.cancel_scope.cancel()

    trio.run(main)


_CRASHING_BROKER = textwrap.dedent(
    """
    import sys, trio
    from kafkalite.cluster import zk_data as zd
    from kafkalite.cluster.kafka_zk import KafkaZkClient
    from kafkalite.cluster.zk_client import ZkClient

    async def main():
        async with ZkClient.open(sys.argv[1], session_timeout_ms=int(sys.argv[2])) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            endpoint = zd.Endpoint("PLAINTEXT", "127.0.0.1", 9005)
            await kafka_zk.register_broker(zd.BrokerInfo(5, (endpoint,)))
            print("registered", flush=True)
            await trio.sleep_forever()

    trio.run(main)
    """
)


def test_killed_broker_leaves_within_the_session_timeout(zk_connect: str) -> None:
    session_timeout_ms = 2000
    process = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_BROKER, zk_connect, str(session_timeout_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "registered\n"

        async def main() -> float:
            async with ZkClient.open(zk_connect) as observer:
                _, _, gone = await observer.get_watch(zd.broker_path(5))
                killed = time.monotonic()
                os.kill(process.pid, signal.SIGKILL)
                with trio.fail_after(WAIT):
                    assert await gone.wait() == WatchEvent("deleted", "/brokers/ids/5")
                assert await KafkaZkClient(observer).live_brokers() == {}
                return time.monotonic() - killed

        elapsed = trio.run(main)
        # ZooKeeper expires the session, not earlier than its timeout (it has no other way to
        # know the process died); the figure is printed, not asserted against a clock.
        print(f"registration removed {elapsed:.2f}s after SIGKILL (session timeout 2s)")
    finally:
        process.kill()
        process.wait()
