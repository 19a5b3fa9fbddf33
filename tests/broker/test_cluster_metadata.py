"""The cluster metadata interface: the single-node store, and handlers answering from it."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import replace

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from partition_fixtures import batch

from kafkalite.apis import describe_cluster, fetch, find_coordinator, metadata
from kafkalite.apis import produce as produce_api
from kafkalite.apis.base import RequestContext
from kafkalite.broker.broker import Broker, local_broker_info
from kafkalite.broker.cluster_metadata import BrokerInfo, Endpoint, TopicMetadata
from kafkalite.broker.metadata_store import SingleNodeMetadata
from kafkalite.broker.partition import PartitionState
from kafkalite.config import build_config
from kafkalite.coordinator import group_partition
from kafkalite.protocol.entities import make
from tests.apis.harness import call, request_module, roundtrip

OTHER = BrokerInfo(2, (Endpoint("PLAINTEXT", "other.example", 9999),), rack="r2")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_partition_state_changed(self, topic: TopicMetadata, state: PartitionState) -> None:
        self.events.append(("state", topic.name, state.partition, state.leader))

    def on_topic_configs_changed(self, name: str, configs) -> None:
        self.events.append(("configs", name, dict(configs)))

    def on_topic_deleted(self, name: str) -> None:
        self.events.append(("deleted", name))

    def on_broker_registered(self, broker: BrokerInfo) -> None:
        self.events.append(("registered", broker.broker_id))

    def on_broker_gone(self, broker_id: int) -> None:
        self.events.append(("gone", broker_id))


def single_node(tmp_path) -> SingleNodeMetadata:
    config = build_config({"log.dirs": str(tmp_path), "broker.id": "1"})
    store = SingleNodeMetadata(tmp_path, local_broker_info(config))
    store.load(1, None)
    return store


def test_single_node_announces_and_persists_changes(tmp_path) -> None:
    store, recorder = single_node(tmp_path), Recorder()
    store.subscribe(recorder)
    store.create_topic(TopicMetadata("t", uuid.uuid4(), 2), [[1], [1]])
    store.add_partitions("t", [[1]])
    store.set_topic_configs("t", {"retention.ms": "5"})
    assert recorder.events == [
        ("state", "t", 0, 1),
        ("state", "t", 1, 1),
        ("state", "t", 2, 1),
        ("configs", "t", {"retention.ms": "5"}),
    ]
    assert store.partition_state("t", 2) == PartitionState("t", 2, (1,), 1, 0, (1,))
    assert store.partition_state("t", 3) is None
    reloaded = single_node(tmp_path)
    assert (reloaded.topics["t"].num_partitions, reloaded.topics["t"].configs) == (
        3,
        {"retention.ms": "5"},
    )
    assert reloaded.cluster_id == store.cluster_id
    store.delete_topic("t")
    assert recorder.events[-1] == ("deleted", "t")
    assert single_node(tmp_path).topics == {}


def test_single_node_assigns_only_itself(tmp_path) -> None:
    store = single_node(tmp_path)
    with pytest.raises(ValueError, match="only assign broker 1"):
        store.create_topic(TopicMetadata("t", uuid.uuid4(), 1), [[2]])
    assert [b.broker_id for b in store.brokers()] == [1]
    assert store.controller_id() == 1


class TwoBrokers(SingleNodeMetadata):
    """This node plus broker 2, which leads the partitions `moved` names: the shape of what a
    ZooKeeper store reports, through the same interface."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.moved: dict[tuple[str, int], PartitionState] = {}

    def brokers(self) -> list[BrokerInfo]:
        return [*super().brokers(), OTHER]

    def _check_assignment(self, assignment) -> None:
        """Partitions start out led here whatever the assignment; `move_leader` moves them."""

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return OTHER if broker_id == OTHER.broker_id else super().broker(broker_id)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.moved.get((topic, partition)) or super().partition_state(topic, partition)

    def move_leader(self, topic: str, partition: int, leader: int, epoch: int) -> None:
        state = self.partition_state(topic, partition)
        assert state is not None
        moved = replace(state, replicas=(1, 2), leader=leader, leader_epoch=epoch, isr=(1, 2))
        self.moved[(topic, partition)] = moved
        for listener in self._listeners:
            listener.on_partition_state_changed(self.topics[topic], moved)


@pytest.fixture
def cluster_broker(tmp_path):
    config = build_config({"log.dirs": str(tmp_path), "broker.id": "1"})
    store = TwoBrokers(tmp_path, local_broker_info(config))
    broker = Broker.open(config, metadata=store)
    yield broker, store
    broker.shutdown()


def test_replica_manager_follows_metadata_changes(cluster_broker) -> None:
    broker, store = cluster_broker
    manager = broker.replica_manager
    broker.admin_manager.create_topic("t", 1, 1)
    store.move_leader("t", 0, leader=2, epoch=3)
    partition = manager.partition("t", 0)
    assert (partition.is_leader, partition.leader_epoch) == (False, 3)
    results, _ = manager.append_records({("t", 0): batch()}, 1)
    assert results[("t", 0)].error is ErrorCode.not_leader_or_follower
    store.move_leader("t", 0, leader=1, epoch=2)  # stale: fenced, nothing changes
    assert (partition.is_leader, partition.leader_epoch) == (False, 3)
    store.move_leader("t", 0, leader=1, epoch=4)
    assert (partition.is_leader, partition.isr) == (True, [1, 2])


def test_metadata_and_describe_cluster_answer_from_the_cluster_metadata(cluster_broker) -> None:
    broker, store = cluster_broker
    broker.admin_manager.create_topic("t", 2, 1)
    store.move_leader("t", 1, leader=2, epoch=1)
    response = call(
        broker,
        metadata.API,
        12,
        lambda m: make(
            m.MetadataRequest,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    assert sorted((b.node_id, b.host, b.port, b.rack) for b in response.brokers) == [
        (1, "127.0.0.1", broker.advertised_listener.port, None),
        (2, "other.example", 9999, "r2"),
    ]
    (topic,) = response.topics
    assert [
        (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes) for p in topic.partitions
    ] == [
        (0, 1, 0, (1,)),
        (1, 2, 1, (1, 2)),
    ]
    cluster = call(
        broker,
        describe_cluster.API,
        0,
        lambda m: make(m.DescribeClusterRequest, include_cluster_authorized_operations=False),
    )
    assert sorted(b.broker_id for b in cluster.brokers) == [1, 2]


def test_find_coordinator_names_the_leader_of_the_group_partition(cluster_broker) -> None:
    broker, store = cluster_broker

    def find(group: str):
        return call(
            broker,
            find_coordinator.API,
            3,
            lambda m: make(m.FindCoordinatorRequest, key=group, key_type=0),
        )

    assert find("g").node_id == 1
    partitions = store.topics["__consumer_offsets"].num_partitions
    store.move_leader("__consumer_offsets", group_partition("g", partitions), leader=2, epoch=1)
    moved = find("g")
    assert (moved.error_code, moved.node_id, moved.host, moved.port) == (
        ErrorCode.none,
        2,
        "other.example",
        9999,
    )


def test_fetch_answers_a_follower_its_diverging_epoch_on_the_wire(cluster_broker) -> None:
    broker, store = cluster_broker
    manager = broker.replica_manager
    broker.admin_manager.create_topic("t", 1, 1)
    manager.append_records({("t", 0): batch(2)}, 1)
    store.move_leader("t", 0, leader=1, epoch=3)  # broker 2 follows this broker from epoch 3

    def build(m):
        partition = make(
            m.FetchPartition,
            partition=0,
            current_leader_epoch=3,
            fetch_offset=5,
            last_fetched_epoch=1,
            log_start_offset=0,
            partition_max_bytes=1 << 20,
        )
        topic = make(m.FetchTopic, topic="t", partitions=(partition,))
        return make(
            m.FetchRequest,
            replica_id=2,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(topic,),
            forgotten_topics_data=(),
            rack_id="",
        )

    request = build(request_module(fetch.API.api_key, 12))
    ctx = RequestContext(broker, fetch.API.api_key, 12, correlation_id=5, client_id="replica")
    response = roundtrip(trio.run(fetch.API.handle, ctx, request), correlation_id=5)
    (data,) = response.responses[0].partitions
    assert (data.error_code, data.records) == (ErrorCode.none, b"")
    # This log has epoch 0 (offsets 0-1) then 3: epoch 1's answer is epoch 0, ending at 2.
    assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 2)


def test_this_broker_registers_its_rack(tmp_path) -> None:
    config = build_config({"log.dirs": str(tmp_path), "broker.rack": "r1"})
    assert local_broker_info(config).rack == "r1"


def test_acks_all_waits_for_the_follower_then_times_out(tmp_path) -> None:
    config = build_config(
        {"log.dirs": str(tmp_path), "broker.id": "1", "request.timeout.ms": "2000"}
    )
    store = TwoBrokers(tmp_path, local_broker_info(config))
    broker = Broker.open(config, metadata=store)
    broker.admin_manager.create_topic("t", 1, 1)
    store.move_leader("t", 0, leader=1, epoch=1)  # ISR {1, 2}: broker 2 never fetches

    def build(m):
        data = make(m.PartitionProduceData, index=0, records=batch(2))
        topic = make(m.TopicProduceData, name="t", partition_data=(data,))
        return make(
            m.ProduceRequest,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=60),
            topic_data=(topic,),
        )

    async def produce() -> tuple[object, float]:
        request = build(request_module(produce_api.API.api_key, 9))
        ctx = RequestContext(broker, produce_api.API.api_key, 9, correlation_id=1, client_id="p")
        start = trio.current_time()
        response = await produce_api.API.handle(ctx, request)
        return response, trio.current_time() - start

    async def main() -> None:
        response, waited = await produce()
        (answer,) = response.responses[0].partition_responses
        # Appended (the leader has it) but not acknowledged: request.timeout.ms caps the wait.
        assert (answer.error_code, waited) == (ErrorCode.request_timed_out, 2.0)
        assert broker.replica_manager.partition("t", 0).log_end_offset == 2
        assert broker.replica_manager.produce_purgatory.watched() == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    broker.shutdown()


def test_single_node_alter_isr_applies_a_current_change_and_answers_a_stale_one(tmp_path) -> None:
    store = single_node(tmp_path)
    states: list[PartitionState] = []

    class States(Recorder):
        def on_partition_state_changed(self, topic: TopicMetadata, state: PartitionState) -> None:
            states.append(state)

    store.create_topic(TopicMetadata("t", uuid.uuid4(), 1), [[1]])
    store.subscribe(States())
    store.alter_isr("t", 0, [1], 0, 0)
    store.alter_isr("t", 0, [1], 0, 0)  # stale: the partition epoch is 1 now
    current = PartitionState("t", 0, (1,), 1, 0, (1,), 1)
    assert states == [current, current]
    assert store.partition_state("t", 0) == current
    assert trio.run(store.wait_for_partitions, ["t"], 0)


def test_a_non_leader_names_the_current_leader_and_its_endpoint(cluster_broker) -> None:
    """KIP-951: Produce v10+ and Fetch v12+ (endpoints from v16) redirect the client."""
    broker, store = cluster_broker
    broker.admin_manager.create_topic("t", 1, 1)
    store.move_leader("t", 0, leader=2, epoch=3)

    def produce(m):
        data = make(m.PartitionProduceData, index=0, records=batch(1))
        topic = make(m.TopicProduceData, name="t", partition_data=(data,))
        return make(
            m.ProduceRequest,
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(topic,),
        )

    ctx = RequestContext(broker, produce_api.API.api_key, 10, correlation_id=1, client_id="p")
    answered = trio.run(
        produce_api.API.handle, ctx, produce(request_module(produce_api.API.api_key, 10))
    )
    response = roundtrip(answered, correlation_id=1)
    (answer,) = response.responses[0].partition_responses
    assert (answer.error_code, answer.current_leader.leader_id) == (
        ErrorCode.not_leader_or_follower,
        2,
    )
    assert answer.current_leader.leader_epoch == 3
    assert [(e.node_id, e.host, e.port, e.rack) for e in response.node_endpoints] == [
        (2, "other.example", 9999, "r2")
    ]
    topic_id = broker.replica_manager.topics["t"].topic_id

    def fetch_request(m):
        partition = make(
            m.FetchPartition,
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        topic = make(m.FetchTopic, topic="t", topic_id=topic_id, partitions=(partition,))
        return make(
            m.FetchRequest,
            replica_id=-1,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(topic,),
            forgotten_topics_data=(),
            rack_id="",
        )

    for version, endpoints in ((12, None), (16, [(2, "other.example", 9999)])):
        request = fetch_request(request_module(fetch.API.api_key, version))
        ctx = RequestContext(broker, fetch.API.api_key, version, correlation_id=2, client_id="c")
        response = roundtrip(trio.run(fetch.API.handle, ctx, request), correlation_id=2)
        (data,) = response.responses[0].partitions
        assert (
            data.error_code,
            data.current_leader.leader_id,
            data.current_leader.leader_epoch,
        ) == (
            ErrorCode.not_leader_or_follower,
            2,
            3,
        )
        if endpoints is not None:
            assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == endpoints
