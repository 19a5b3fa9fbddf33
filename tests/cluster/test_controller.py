"""The controller against a real ZooKeeper, three brokers' stores and candidacies in one trio
run: initial states of a new topic, leader election when a broker's session ends, a new
controller taking over (controller epoch + 1), a deposed controller's write fenced."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import trio

from kafkalite.broker.cluster_metadata import BrokerInfo, Endpoint, TopicMetadata
from kafkalite.broker.replica_assignment import assign_replicas
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.kafka_zk import ControllerMoved, KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zk_metadata import ZkMetadata

pytestmark = pytest.mark.slow
WAIT = 30


@dataclass
class Member:
    metadata: ZkMetadata
    controller: Controller
    scope: trio.CancelScope
    stopped: trio.Event

    async def stop(self) -> None:
        """End this broker's session (its ephemeral nodes go at once)."""
        self.scope.cancel()
        await self.stopped.wait()


def broker_info(broker_id: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9200 + broker_id),))


async def run_member(
    zk_connect: str, broker_id: int, *, task_status: trio.TaskStatus[Member]
) -> None:
    stopped = trio.Event()
    try:
        with trio.CancelScope() as scope:
            async with ZkClient.open(zk_connect, 4000) as zk, trio.open_nursery() as nursery:
                metadata = ZkMetadata(zk, broker_info(broker_id))
                await metadata.start("cluster")
                controller = Controller(zk, broker_id)
                await nursery.start(metadata.run)
                await nursery.start(controller.run)
                task_status.started(Member(metadata, controller, scope, stopped))
    finally:
        stopped.set()


async def until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(WAIT):
        while not condition():
            await trio.sleep(0.01)  # polling a cache the watches update


def test_controller_elects_and_fails_over(zk_connect: str) -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            members = {b: await nursery.start(run_member, zk_connect, b) for b in (1, 2, 3)}
            await scenario(members)
            nursery.cancel_scope.cancel()

    async def scenario(members: dict[int, Member]) -> None:
        one = members[1].metadata
        await until(lambda: len(one.brokers()) == 3 and one.controller_id() > 0)

        racks = {b: None for b in (1, 2, 3)}
        topic = TopicMetadata("t", uuid.uuid4(), 6, 3)
        one.create_topic(topic, assign_replicas(racks, 6, 3, rng=random.Random(1)))
        assert await one.wait_for_partitions(["t"], WAIT)
        states = one.partition_states("t")
        assert Counter(s.leader for s in states) == {1: 2, 2: 2, 3: 2}
        assert all(s.leader_epoch == 0 and sorted(s.isr) == [1, 2, 3] for s in states)

        # A broker that is not the controller goes: its partitions get new leaders.
        first_controller = one.controller_id()
        victim = next(b for b in (2, 3) if b != first_controller)
        survivor = members[next(b for b in (1, 2, 3) if b not in (victim, first_controller))]
        led = {s.partition for s in states if s.leader == victim}
        await members[victim].stop()
        watcher = survivor.metadata

        def moved() -> bool:
            now = watcher.partition_states("t")
            return all(s.leader != victim and victim not in s.isr for s in now)

        await until(moved)
        for state in watcher.partition_states("t"):
            assert state.leader_epoch == 1, state  # new leader, or the ISR shrunk
            assert sorted(state.isr) == sorted({1, 2, 3} - {victim})
        assert {s.partition for s in watcher.partition_states("t")} >= led

        # The controller goes: the survivor takes over with the next controller epoch.
        kafka_zk = KafkaZkClient(watcher.zk)
        old = await kafka_zk.controller_epoch()
        assert old is not None
        await members[first_controller].stop()
        await until(lambda: watcher.controller_id() == survivor.controller.broker_id)
        new = await kafka_zk.controller_epoch()
        assert new is not None and new.epoch == old.epoch + 1
        # Partitions the survivor led already only lose the old controller from their ISR:
        # wait for those writes too (the leaders alone can be right before they land).
        await until(
            lambda: all(
                s.leader == survivor.controller.broker_id and s.controller_epoch == new.epoch
                for s in watcher.partition_states("t")
            )
        )

        # The deposed controller's epoch no longer writes.
        current = await kafka_zk.partition_state("t", 0)
        assert current is not None
        with pytest.raises(ControllerMoved):
            await kafka_zk.set_partition_state(
                "t", 0, zd.PartitionState(7, 99, (7,), old.epoch), current.zk_version, old
            )

        # ... nor deletes a topic.
        deposed = Controller(watcher.zk, first_controller)
        with pytest.raises(ControllerMoved):
            await deposed._delete_topic("t", old)
        assert await watcher.zk.exists(zd.partition_state_path("t", 0))

        # Deletion: the controller removes the topic; the store forgets it.
        watcher.delete_topic("t")
        await until(lambda: "t" not in watcher.topics)
        assert not await watcher.zk.exists(zd.topic_path("t"))

    trio.run(main)
