"""The ZooKeeper-backed cluster metadata (kafkalite.cluster.zk_metadata) against a real
ZooKeeper: registration, the caches and their events on the trio side, topic creation as
znode requests, the leader's conditional ISR change, producer ids unique across brokers."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import pytest
import trio

from kafkalite.broker.cluster_metadata import BrokerInfo, Endpoint, TopicMetadata
from kafkalite.broker.partition import PartitionState
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zk_metadata import ZkMetadata

pytestmark = pytest.mark.slow
WAIT = 30


class Recorder:
    """A MetadataListener writing down every event, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.changed = trio.Event()

    def _add(self, *event: object) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = trio.Event()

    def on_partition_state_changed(self, topic: TopicMetadata, state: PartitionState) -> None:
        self._add("state", topic.name, state)

    def on_topic_configs_changed(self, name: str, configs: Mapping[str, str]) -> None:
        self._add("configs", name, dict(configs))

    def on_topic_deleted(self, name: str) -> None:
        self._add("deleted", name)

    def on_broker_registered(self, broker: BrokerInfo) -> None:
        self._add("registered", broker.broker_id)

    def on_broker_gone(self, broker_id: int) -> None:
        self._add("gone", broker_id)

    async def wait_for(self, event: tuple) -> None:
        with trio.fail_after(WAIT):
            while event not in self.events:
                await self.changed.wait()


def broker_info(broker_id: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9100 + broker_id),), rack)


@asynccontextmanager
async def store(zk_connect: str, broker_id: int) -> AsyncIterator[tuple[ZkMetadata, Recorder]]:
    async with ZkClient.open(zk_connect, 6000) as zk, trio.open_nursery() as nursery:
        metadata = ZkMetadata(zk, broker_info(broker_id, rack=f"r{broker_id}"))
        await metadata.start("proposed-id")
        metadata.load(broker_id, None)
        recorder = Recorder()
        metadata.subscribe(recorder)
        await nursery.start(metadata.run)
        yield metadata, recorder
        nursery.cancel_scope.cancel()


def test_store_registers_caches_and_follows_changes(zk_connect: str) -> None:
    async def main() -> None:
        async with store(zk_connect, 1) as (one, rec1):
            async with store(zk_connect, 2) as (two, rec2):
                await scenario(one, rec1, two, rec2)
            await rec1.wait_for(("gone", 2))  # its session closed: the ephemeral node went
            assert [b.broker_id for b in one.brokers()] == [1]

    async def scenario(one: ZkMetadata, rec1: Recorder, two: ZkMetadata, rec2: Recorder) -> None:
        await rec1.wait_for(("registered", 2))
        assert [b.broker_id for b in one.brokers()] == [1, 2]
        assert one.broker(2) == broker_info(2, rack="r2")
        assert one.cluster_id == two.cluster_id == "proposed-id"

        # CreateTopics on broker 1: the znodes Kafka's brokers wrote.
        topic = TopicMetadata("t", uuid.uuid4(), 2, 2, {"retention.ms": "1000"})
        one.create_topic(topic, [[1, 2], [2, 1]])
        assert "t" in one.topics
        admin = KafkaZkClient(two.zk)
        with trio.fail_after(WAIT):
            while await admin.topic_assignment("t") is None:
                await trio.sleep(0.01)
        assignment = await admin.topic_assignment("t")
        assert assignment is not None and assignment.topic_id == topic.topic_id
        assert {p: a.replicas for p, a in assignment.partitions.items()} == {
            0: (1, 2),
            1: (2, 1),
        }
        assert await admin.entity_config("topics", "t") == {"retention.ms": "1000"}
        assert not await one.wait_for_partitions(["t"], 0.05)  # no controller yet

        # A controller's states reach both brokers' listeners, partitions in order.
        controller = await admin.try_become_controller(2)
        assert controller is not None
        for index, leader in ((0, 1), (1, 2)):
            state = zd.PartitionState(leader, 0, (1, 2), controller.epoch)
            await admin.create_partition_state("t", index, state, controller)
        assert await one.wait_for_partitions(["t"], WAIT)
        expected0 = PartitionState("t", 0, (1, 2), 1, 0, (1, 2), 0, controller.epoch)
        expected1 = PartitionState("t", 1, (2, 1), 2, 0, (1, 2), 0, controller.epoch)
        for rec in (rec1, rec2):
            await rec.wait_for(("state", "t", expected1))
            states = [e[2] for e in rec.events if e[0] == "state"]
            assert states == [expected0, expected1]
        assert one.controller_id() == two.controller_id() == 2
        assert two.topics["t"].configs == {"retention.ms": "1000"}

        # The leader's ISR change: conditional on the version; a stale one is refused and
        # the current state is what the listeners see.
        one.alter_isr("t", 0, [1], 0, 0)
        shrunk = PartitionState("t", 0, (1, 2), 1, 0, (1,), 1, controller.epoch)
        await rec2.wait_for(("state", "t", shrunk))
        await rec1.wait_for(("state", "t", shrunk))
        one.alter_isr("t", 0, [1, 2], 0, 0)  # stale: version 0 is gone
        one.alter_isr("t", 0, [1, 2], 0, 1)
        grown = PartitionState("t", 0, (1, 2), 1, 0, (1, 2), 2, controller.epoch)
        await rec2.wait_for(("state", "t", grown))
        assert [e[2] for e in rec2.events if e[0] == "state"][-2:] == [shrunk, grown]
        assert len(await two.zk.children(zd.ISR_CHANGE_NOTIFICATION)) == 2

        # Producer ids: disjoint blocks per broker.
        ids1 = {one.allocate_producer_id() for _ in range(600)}
        ids2 = {two.allocate_producer_id() for _ in range(600)}
        assert len(ids1) == len(ids2) == 600 and not ids1 & ids2

        # Deletion is a request; the topic goes when its znode does.
        one.delete_topic("t")
        with trio.fail_after(WAIT):
            while not await two.zk.exists(zd.delete_topic_path("t")):
                await trio.sleep(0.01)
        for index in (0, 1):
            await two.zk.delete(zd.partition_state_path("t", index))
            await two.zk.delete(zd.partition_path("t", index))
        await two.zk.delete(zd.partitions_path("t"))
        await two.zk.delete(zd.topic_path("t"))
        await rec1.wait_for(("deleted", "t"))
        await rec2.wait_for(("deleted", "t"))
        assert "t" not in one.topics and one.partition_states("t") == []

    trio.run(main)


def test_catch_up_reads_a_topic_before_its_watches_fire(zk_connect: str) -> None:
    """The race CI hit (kafka-python's test_list_partition_offsets on the cluster): a topic
    created and led elsewhere, asked of a broker whose watches have not fired yet. Here the
    broker's store never runs its watch loops, so only `catch_up` can bring the topic in."""

    async def main() -> None:
        async with ZkClient.open(zk_connect, 6000) as zk, ZkClient.open(zk_connect, 6000) as other:
            lagging = ZkMetadata(zk, broker_info(2))
            await lagging.start("proposed-id")
            recorder = Recorder()
            lagging.subscribe(recorder)
            admin = KafkaZkClient(other)
            controller = await admin.try_become_controller(1)
            assert controller is not None
            replicas = {0: zd.ReplicaAssignment((2, 1)), 1: zd.ReplicaAssignment((1, 2))}
            await admin.create_topic("late", zd.TopicAssignment(replicas, uuid.uuid4()))
            await admin.create_partition_state(
                "late", 0, zd.PartitionState(2, 0, (2, 1), controller.epoch), controller
            )

            await lagging.catch_up(["late", "never-created", "bad/name"])  # one partition so far
            assert "late" in lagging.topics and len(lagging.partition_states("late")) == 1
            assert "never-created" not in lagging.topics

            await admin.create_partition_state(
                "late", 1, zd.PartitionState(1, 0, (1, 2), controller.epoch), controller
            )
            await lagging.catch_up(["late"])
            assert [s.leader for s in lagging.partition_states("late")] == [2, 1]
            assert [e[:2] for e in recorder.events] == [("state", "late"), ("state", "late")]
            events = len(recorder.events)
            await lagging.catch_up(["late"])  # complete: nothing read again, nothing told
            assert len(recorder.events) == events

    trio.run(main)


def test_creating_a_topic_another_broker_created_leaves_its_configs(zk_connect: str) -> None:
    """The race a view hit on the cluster: a broker whose cache lags auto-creates a topic
    that another broker has just created with configs (a view's definition). Its write must
    find the topic there and change nothing: before, it replaced the configs with its own."""

    async def main() -> None:
        async with ZkClient.open(zk_connect, 6000) as other, store(zk_connect, 2) as (two, _):
            admin = KafkaZkClient(other)
            configs = {"kafkalite.view.source": "orders", "kafkalite.view.filter": "a = 'b'"}
            await admin.set_entity_config("topics", "orders.v", configs)
            await admin.create_topic(
                "orders.v", zd.TopicAssignment({0: zd.ReplicaAssignment((1,))})
            )

            auto_created = TopicMetadata("orders.v", uuid.uuid4(), 1, 1, {})
            two.create_topic(auto_created, [[2]])
            await two.wait_until(lambda: "orders.v" not in two._creating, WAIT)

            assert await admin.entity_config("topics", "orders.v") == configs
            assignment = await admin.topic_assignment("orders.v")
            assert assignment is not None and assignment.partitions[0].replicas == (1,)

    trio.run(main)


def test_a_view_is_ready_once_its_znodes_are_written(zk_connect: str) -> None:
    """A view's partition states are its source's, there at once: CreateTopics' wait must
    still last until the view is in ZooKeeper, or another broker asked next does not find
    it (and auto-creates a plain topic of that name)."""

    async def main() -> None:
        async with ZkClient.open(zk_connect, 6000) as other, store(zk_connect, 1) as (one, _):
            admin = KafkaZkClient(other)
            controller = await admin.try_become_controller(1)
            assert controller is not None
            await admin.create_topic("orders", zd.TopicAssignment({0: zd.ReplicaAssignment((1,))}))
            state = zd.PartitionState(1, 0, (1,), controller.epoch)
            await admin.create_partition_state("orders", 0, state, controller)
            await one.catch_up(["orders"])

            configs = {"kafkalite.view.source": "orders", "kafkalite.view.filter": "a = 'b'"}
            one.create_topic(TopicMetadata("orders.v", uuid.uuid4(), 1, 1, configs), [[1]])
            assert await one.wait_for_partitions(["orders.v"], WAIT)
            assert await admin.topic_assignment("orders.v") is not None
            assert await admin.entity_config("topics", "orders.v") == configs
            assert one.partition_state("orders.v", 0) == PartitionState(
                "orders.v", 0, (1,), 1, 0, (1,), 0, controller.epoch
            )

    trio.run(main)
