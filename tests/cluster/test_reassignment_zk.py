"""The ZooKeeper writes of partition reassignment (kafkalite/cluster/reassignment_zk.py) against
a real ZooKeeper: the start (RS/AR/RR and a bumped leader epoch), the completion once the ISR
holds the target, and a deposed controller's writes refused."""

from __future__ import annotations

import uuid

import pytest
import trio

from kafkalite.cluster import reassignment_zk
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import ControllerMoved, KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient

pytestmark = pytest.mark.slow
LIVE = {1, 2, 3}


def test_start_complete_and_fencing(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            epoch = await kafka_zk.try_become_controller(1)
            assert epoch is not None
            topic_id = uuid.uuid4()
            steady = zd.TopicAssignment({0: zd.ReplicaAssignment((1, 2))}, topic_id)
            await kafka_zk.create_topic("t", steady)
            await kafka_zk.create_partition_state(
                "t", 0, zd.PartitionState(1, 0, (1, 2), epoch.epoch), epoch
            )

            assert await reassignment_zk.start(zk, epoch, "t", {0: (2, 3)}, LIVE) == {0: None}
            moving = await kafka_zk.topic_assignment("t")
            assert moving == zd.TopicAssignment(
                {0: zd.ReplicaAssignment((2, 3, 1), (3,), (1,))}, topic_id
            )
            state = await kafka_zk.partition_state("t", 0)
            assert state is not None and state.state == zd.PartitionState(1, 1, (1, 2), epoch.epoch)
            assert list(await reassignment_zk.ongoing(zk)) == ["t"]

            # Broker 3 not in the ISR yet: nothing completes, the state znode is watched.
            watches = await reassignment_zk.advance(zk, epoch, LIVE)
            assert len(watches) == 1 and await kafka_zk.topic_assignment("t") == moving

            # The leader adds 3 to the ISR (its own conditional write): the move completes.
            caught_up = zd.PartitionState(1, 1, (1, 2, 3), epoch.epoch)
            await kafka_zk.set_partition_state("t", 0, caught_up, state.zk_version)
            with trio.fail_after(30):
                await watches[0].wait()
            await reassignment_zk.advance(zk, epoch, LIVE)
            done = await kafka_zk.topic_assignment("t")
            assert done == zd.TopicAssignment({0: zd.ReplicaAssignment((2, 3))}, topic_id)
            final = await kafka_zk.partition_state("t", 0)
            assert final is not None and final.state == zd.PartitionState(2, 2, (2, 3), epoch.epoch)
            assert await reassignment_zk.ongoing(zk) == {}

            # Another controller elected: the deposed one's start writes nothing.
            await kafka_zk.resign_controller(epoch)
            assert await kafka_zk.try_become_controller(2) is not None
            with pytest.raises(ControllerMoved):
                await reassignment_zk.start(zk, epoch, "t", {0: (1, 2)}, LIVE)
            assert await kafka_zk.topic_assignment("t") == done

    trio.run(main)
