"""Several brokers in one trio run, replicating over real sockets: a shared in-memory
cluster metadata plays the controller (elections, conditional ISR writes) and hands every
decision to each broker's ReplicaManager, as the ZooKeeper store would."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import trio

from kafkalite.broker.broker import Broker, local_broker_info
from kafkalite.broker.cluster_metadata import (
    Assignment,
    BrokerInfo,
    MetadataListener,
    TopicMetadata,
)
from kafkalite.broker.partition import PartitionState
from kafkalite.config import build_config
from kafkalite.server import bound_config, open_listeners, serve


class SharedCluster:
    """The cluster's metadata, as the controller keeps it."""

    def __init__(self) -> None:
        self.cluster_id = "shared-cluster-test"
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.views: list[MetadataView] = []
        self._producer_ids = itertools.count(1000)
        self.isr_changes: list[tuple[str, int, tuple[int, ...]]] = []

    def view(self, broker_id: int) -> MetadataView:
        view = MetadataView(self, broker_id)
        self.views.append(view)
        return view

    def announce(self, state: PartitionState) -> None:
        self.states[(state.topic, state.partition)] = state
        for view in list(self.views):
            for listener in list(view.listeners):
                listener.on_partition_state_changed(self.topics[state.topic], state)

    def create(self, topic: TopicMetadata, assignment: Assignment, first: int = 0) -> None:
        for offset, replicas in enumerate(assignment):
            replicas = tuple(replicas)
            self.announce(
                PartitionState(topic.name, first + offset, replicas, replicas[0], 0, replicas)
            )

    def create_topic(self, name: str, assignment: Assignment) -> TopicMetadata:
        """A topic placed as `assignment` says (the first replica of each partition leads),
        whatever placement the brokers would choose."""
        topic = TopicMetadata(name, uuid.uuid4(), len(assignment), len(assignment[0]))
        self.topics[name] = topic
        self.create(topic, assignment)
        return topic

    def elect(self, topic: str, partition: int, leader: int, isr: tuple[int, ...]) -> None:
        """A new leader in a new epoch (what the controller does when a leader dies)."""
        state = self.states[(topic, partition)]
        self.announce(
            replace(
                state,
                leader=leader,
                leader_epoch=state.leader_epoch + 1,
                isr=isr,
                partition_epoch=state.partition_epoch + 1,
            )
        )

    def alter_isr(
        self,
        topic: str,
        partition: int,
        new_isr: list[int],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        state = self.states.get((topic, partition))
        if state is None or (state.leader_epoch, state.partition_epoch) != (
            leader_epoch,
            partition_epoch,
        ):
            return  # a stale leader's request: the conditional write fails
        self.isr_changes.append((topic, partition, tuple(new_isr)))
        self.announce(replace(state, isr=tuple(new_isr), partition_epoch=partition_epoch + 1))


@dataclass
class MetadataView:
    """One broker's ClusterMetadata over the shared cluster."""

    cluster: SharedCluster
    broker_id: int

    def __post_init__(self) -> None:
        self.listeners: list[MetadataListener] = []

    @property
    def cluster_id(self) -> str:
        return self.cluster.cluster_id

    def load(self, node_id: int, configured_cluster_id: str | None) -> None:
        pass

    def subscribe(self, listener: MetadataListener) -> None:
        self.listeners.append(listener)

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return self.cluster.topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self.cluster.topics.values() if t.topic_id == topic_id), None)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.cluster.states.get((topic, partition))

    def partition_states(self, topic: str) -> list[PartitionState]:
        meta = self.cluster.topics.get(topic)
        count = meta.num_partitions if meta is not None else 0
        states = (self.cluster.states.get((topic, i)) for i in range(count))
        return [state for state in states if state is not None]

    def brokers(self) -> list[BrokerInfo]:
        return [self.cluster.brokers[i] for i in sorted(self.cluster.brokers)]

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.cluster.brokers.get(broker_id)

    def controller_id(self) -> int:
        return min(self.cluster.brokers)

    def create_topic(self, topic: TopicMetadata, assignment: Assignment) -> None:
        self.cluster.topics[topic.name] = topic
        self.cluster.create(topic, assignment)

    def add_partitions(self, name: str, assignment: Assignment) -> None:
        topic = self.cluster.topics[name]
        first = topic.num_partitions
        topic.num_partitions += len(assignment)
        self.cluster.create(topic, assignment, first)

    def delete_topic(self, name: str) -> None:
        del self.cluster.topics[name]
        for view in self.cluster.views:
            for listener in view.listeners:
                listener.on_topic_deleted(name)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.cluster.topics[name].configs = dict(configs)

    def allocate_producer_id(self) -> int:
        return next(self.cluster._producer_ids)

    async def catch_up(self, names: Sequence[str]) -> None:
        return None  # every broker's view is the shared cluster itself: never behind

    def alter_isr(
        self,
        topic: str,
        partition: int,
        new_isr: list[int],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        self.cluster.alter_isr(topic, partition, new_isr, leader_epoch, partition_epoch)


class ManualClock:
    """Milliseconds the test moves (last caught-up times, replica.lag.time.max.ms)."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@dataclass
class RunningBroker:
    broker: Broker
    cancel_scope: trio.CancelScope

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def stop(self) -> None:
        """Stop serving and fetching (the process is gone, as far as the others can tell)."""
        self.cancel_scope.cancel()


@asynccontextmanager
async def running_cluster(tmp_path: Path, count: int, clock: ManualClock, **overrides: str):
    """`count` brokers (ids 1..count) serving on free ports, with their fetchers running."""
    cluster = SharedCluster()
    configs = {}
    sockets = {}
    for broker_id in range(1, count + 1):
        config = build_config(
            {
                "log.dirs": str(tmp_path / f"broker-{broker_id}"),
                "broker.id": str(broker_id),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "offsets.topic.replication.factor": "1",
                "offsets.topic.num.partitions": "1",
                **overrides,
            }
        )
        sockets[broker_id] = await open_listeners(config)
        configs[broker_id] = bound_config(config, sockets[broker_id])
        cluster.brokers[broker_id] = local_broker_info(configs[broker_id])
    running: dict[int, RunningBroker] = {}
    async with trio.open_nursery() as nursery:
        for broker_id, config in configs.items():
            broker = Broker.open(config, clock, metadata=cluster.view(broker_id))
            scope = trio.CancelScope()
            running[broker_id] = RunningBroker(broker, scope)

            async def serve_until_stopped(broker=broker, scope=scope, listeners=sockets[broker_id]):
                with scope:
                    await serve(broker, listeners, handle_signals=False)

            nursery.start_soon(serve_until_stopped)
        try:
            yield cluster, running
        finally:
            nursery.cancel_scope.cancel()
    for each in running.values():
        each.broker.shutdown()
