"""The differential cluster suite: the same replication scenarios against a 3-broker kafkalite
cluster on a real ZooKeeper and a 3-node KRaft Apache Kafka (compat/cluster_targets.py), with
stock confluent-kafka clients and the same exact assertions on both.

Each cluster is started once for the module (ids `[kafkalite]` / `[kafka]`; pytest runs one
cluster's tests, stops it, then starts the other) and shared by the scenarios. A scenario that
kills a broker starts it again and waits for a full ISR before it ends; `every_broker_running`
starts whatever a failed scenario left stopped. Partition state (leader, leader epoch,
replicas, ISR) is read with raw Metadata requests sent to one chosen broker, so "broker 3
sees it" means broker 3 answered it. Differences are strict xfails on kafkalite with a line in
compat/FINDINGS.md.
"""

from __future__ import annotations

import concurrent.futures
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat.cluster_targets import BROKER_IDS, CLUSTER_TARGETS, Cluster, running_cluster
from compat.conftest import make_topic_name
from compat.kafka_tools import run_tool
from protocol_tests.raw_client import RawClient, list_offsets_request, metadata_request
from tests.integration.e2e_helpers import wait_until

pytestmark = pytest.mark.slow

WAIT = 60.0  # a failure bound for the cluster to converge (session timeouts are 6 s)
CLIENT_TIMEOUT = 30.0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6


# -- the clusters ---------------------------------------------------------------------------


@pytest.fixture(scope="module", params=CLUSTER_TARGETS, ids=CLUSTER_TARGETS)
def cluster_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster(cluster_name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(cluster_name, tmp_path_factory.mktemp(f"cluster-{cluster_name}")) as c:
        wait_until(lambda: all_brokers_seen(c), WAIT, 0.2, "3 brokers in every broker's metadata")
        try:
            yield c
        finally:
            _ADMINS.clear()  # before the brokers go, so they do not log reconnections


@pytest.fixture(autouse=True)
def every_broker_running(cluster: Cluster) -> Iterator[None]:
    """A scenario starts with every broker up, even after one that failed half-way."""
    cluster.start_stopped()
    yield
    cluster.start_stopped()


@pytest.fixture
def clients() -> Iterator[list[Any]]:
    """Producers and consumers of one scenario: consumers are closed after it (also on
    failure), producers given no more time for what they still hold."""
    made: list[Any] = []
    yield made
    for client in made:
        if isinstance(client, Consumer):
            client.close()
        elif isinstance(client, Producer):
            client.flush(0)


def topic_name(request: pytest.FixtureRequest) -> str:
    return make_topic_name(request.node.originalname)


# -- raw metadata from one broker -------------------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    leader: int
    epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


def metadata(cluster: Cluster, broker_id: int, topics: list[str] | None = None) -> Any:
    with RawClient("127.0.0.1", cluster.port_of(broker_id)) as client:
        return client.request(metadata_request(topics, auto_create=False))


def all_brokers_seen(cluster: Cluster) -> bool:
    return all(
        sorted(int(b.node_id) for b in metadata(cluster, i, []).brokers) == list(BROKER_IDS)
        for i in BROKER_IDS
    )


def topic_error(cluster: Cluster, broker_id: int, topic: str) -> int:
    return int(metadata(cluster, broker_id, [topic]).topics[0].error_code)


def partition_states(cluster: Cluster, broker_id: int, topic: str) -> dict[int, PartitionState]:
    """The topic's partitions as `broker_id` answers them ({} while it does not know it)."""
    (answer,) = metadata(cluster, broker_id, [topic]).topics
    if int(answer.error_code) != 0:
        return {}
    return {
        int(p.partition_index): PartitionState(
            int(p.leader_id),
            int(p.leader_epoch),
            tuple(int(r) for r in p.replica_nodes),
            tuple(sorted(int(r) for r in p.isr_nodes)),
            tuple(sorted(int(r) for r in p.offline_replicas)),
        )
        for p in answer.partitions
    }


def wait_states(
    cluster: Cluster,
    topic: str,
    condition: Callable[[dict[int, PartitionState]], bool],
    what: str,
    brokers: tuple[int, ...] = BROKER_IDS,
) -> dict[int, PartitionState]:
    """Until every broker of `brokers` answers partition states meeting `condition`; the
    states of the first of them."""

    def met() -> dict[int, PartitionState] | None:
        answers = [partition_states(cluster, b, topic) for b in brokers]
        return answers[0] if all(a and condition(a) for a in answers) else None

    return wait_until(met, WAIT, 0.1, f"{what} ({topic} on brokers {brokers})")


def full_isr(partitions: int) -> Callable[[dict[int, PartitionState]], bool]:
    return lambda states: (
        len(states) == partitions
        and all(
            s.isr == BROKER_IDS and s.offline == () and s.leader in s.replicas
            for s in states.values()
        )
    )


# -- clients ----------------------------------------------------------------------------------


# Kept for the module: confluent-kafka fails the futures of a collected AdminClient (_DESTROY).
_ADMINS: dict[str, AdminClient] = {}


def admin(bootstrap: str) -> AdminClient:
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return _ADMINS[bootstrap]


def create_topic(cluster: Cluster, topic: NewTopic) -> dict[int, PartitionState]:
    """Create through the AdminClient; the states once every broker sees every partition with
    its full ISR."""
    admin(cluster.bootstrap).create_topics([topic])[topic.topic].result(CLIENT_TIMEOUT)
    count = len(topic.replica_assignment) if topic.replica_assignment else topic.num_partitions
    return wait_states(cluster, topic.topic, full_isr(count), "a full ISR")


def new_topic(name: str, partitions: int = 1, **config: str) -> NewTopic:
    return NewTopic(name, partitions, 3, config=config)


@dataclass
class Acks:
    acked: list[int]
    failed: list[str]

    def callback(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            self.acked.append(int(message.value()))
        else:
            self.failed.append(error.name())


def producer(clients: list[Any], bootstrap: str, **conf: Any) -> Producer:
    made = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **conf})
    clients.append(made)
    return made


def produce_numbers(made: Producer, topic: str, numbers: range) -> Acks:
    acks = Acks([], [])
    for number in numbers:
        made.produce(topic, str(number).encode(), partition=0, on_delivery=acks.callback)
        made.poll(0)
    assert made.flush(WAIT) == 0
    return acks


def read_all(clients: list[Any], bootstrap: str, topic: str, count: int) -> list[Any]:
    """Partition 0 from offset 0 until `count` records or the deadline."""
    made = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cluster-diff-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    clients.append(made)
    made.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + WAIT
    while len(messages) < count and time.monotonic() < deadline:
        message = made.poll(0.5)
        if message is not None and message.error() is None:
            messages.append(message)
    return messages


# -- scenarios --------------------------------------------------------------------------------


def test_metadata_names_three_brokers_and_full_replica_sets(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    client = admin(cluster.bootstrap)
    answer = client.list_topics(timeout=CLIENT_TIMEOUT)
    assert sorted(answer.brokers) == list(BROKER_IDS)
    assert {b.port for b in answer.brokers.values()} == set(cluster.ports.values())
    assert answer.controller_id in BROKER_IDS
    topic = topic_name(request)
    states = create_topic(cluster, new_topic(topic, partitions=3))
    for state in states.values():
        assert sorted(state.replicas) == list(BROKER_IDS)
        assert state.isr == BROKER_IDS
        assert state.leader == state.replicas[0]  # the preferred replica leads a new topic
    # Round-robin placement: every broker is preferred leader of exactly one partition.
    assert sorted(s.replicas[0] for s in states.values()) == list(BROKER_IDS)
    # Every broker answers the same placement.
    for broker_id in BROKER_IDS:
        assert partition_states(cluster, broker_id, topic) == states
    described = client.describe_cluster().result(CLIENT_TIMEOUT)
    assert sorted(node.id for node in described.nodes) == list(BROKER_IDS)
    assert described.controller.id in BROKER_IDS
    assert described.cluster_id


def test_replication_factor_above_the_broker_count_is_refused(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    topic = topic_name(request)
    future = admin(cluster.bootstrap).create_topics([NewTopic(topic, 1, 4)])[topic]
    with pytest.raises(KafkaException) as refused:
        future.result(CLIENT_TIMEOUT)
    assert refused.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    for broker_id in BROKER_IDS:
        assert topic_error(cluster, broker_id, topic) == UNKNOWN_TOPIC_OR_PARTITION


def test_manual_replica_assignment_is_honoured(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    topic = topic_name(request)
    assignment = [[2, 3], [3, 1], [1, 2]]
    create = admin(cluster.bootstrap).create_topics(
        [NewTopic(topic, 3, replica_assignment=assignment)]
    )
    create[topic].result(CLIENT_TIMEOUT)
    states = wait_states(
        cluster,
        topic,
        lambda s: len(s) == 3 and all(len(p.isr) == 2 for p in s.values()),
        "every assigned replica in the ISR",
    )
    assert {p: s.replicas for p, s in states.items()} == {0: (2, 3), 1: (3, 1), 2: (1, 2)}
    assert {p: s.leader for p, s in states.items()} == {0: 2, 1: 3, 2: 1}
    assert {p: s.isr for p, s in states.items()} == {0: (2, 3), 1: (1, 3), 2: (1, 2)}


@pytest.mark.parametrize(
    "assignment",
    [[[2, 3], [3, 1, 2]], [[1, 1]], [[1, 7]]],
    ids=["uneven-replica-counts", "duplicate-broker", "unknown-broker"],
)
def test_bad_replica_assignment_is_refused(
    cluster: Cluster, request: pytest.FixtureRequest, assignment: list[list[int]]
) -> None:
    topic = topic_name(request)
    new = NewTopic(topic, len(assignment), replica_assignment=assignment)
    with pytest.raises(KafkaException) as refused:
        admin(cluster.bootstrap).create_topics([new])[topic].result(CLIENT_TIMEOUT)
    assert refused.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    for broker_id in BROKER_IDS:
        assert topic_error(cluster, broker_id, topic) == UNKNOWN_TOPIC_OR_PARTITION


def test_acks_all_is_refused_below_min_insync_and_the_isr_returns(
    cluster: Cluster, request: pytest.FixtureRequest, clients: list[Any]
) -> None:
    topic = topic_name(request)
    (state,) = create_topic(cluster, new_topic(topic, **{"min.insync.replicas": "3"})).values()
    # No retries: the broker's answer reaches the delivery report as it is.
    conf = {"enable.idempotence": False, "retries": 0, "message.timeout.ms": 30_000}
    assert produce_numbers(producer(clients, cluster.bootstrap, **conf), topic, range(1)) == Acks(
        [0], []
    )
    victim = max(b for b in state.replicas if b != state.leader)
    cluster.kill(victim)
    rest = tuple(b for b in BROKER_IDS if b != victim)
    shrunk = wait_states(
        cluster,
        topic,
        lambda s: s[0].isr == rest and s[0].offline == (victim,),
        "the ISR without the dead follower, which is offline",
        rest,
    )
    assert (shrunk[0].leader, shrunk[0].replicas) == (state.leader, state.replicas)
    refused = produce_numbers(
        producer(clients, cluster.survivors(victim), **conf), topic, range(1, 2)
    )
    assert refused == Acks([], ["NOT_ENOUGH_REPLICAS"])
    cluster.start(victim)
    wait_states(cluster, topic, full_isr(1), "the restarted follower back in the ISR")
    accepted = produce_numbers(producer(clients, cluster.bootstrap, **conf), topic, range(2, 3))
    assert accepted == Acks([2], [])
    assert [int(m.value()) for m in read_all(clients, cluster.bootstrap, topic, 2)] == [0, 2]
    assert [m.offset() for m in read_all(clients, cluster.bootstrap, topic, 2)] == [0, 1]


RECORDS = 2000
KILL_AFTER = 500  # acknowledged records before the leader dies


def test_leader_killed_under_idempotent_acks_all_load_loses_nothing(
    cluster: Cluster, request: pytest.FixtureRequest, clients: list[Any]
) -> None:
    topic = topic_name(request)
    (before,) = create_topic(cluster, new_topic(topic, **{"min.insync.replicas": "2"})).values()
    made = producer(
        clients, cluster.bootstrap, **{"enable.idempotence": True, "message.timeout.ms": 120_000}
    )
    acks = Acks([], [])
    killed = False
    for number in range(RECORDS):
        made.produce(topic, str(number).encode(), partition=0, on_delivery=acks.callback)
        made.poll(0)
        while len(made) > 100:
            made.poll(0.05)  # a bounded backlog keeps the kill mid-stream
        if not killed and len(acks.acked) >= KILL_AFTER:
            cluster.kill(before.leader)
            killed = True
    assert made.flush(120) == 0
    assert killed
    survivors = tuple(b for b in BROKER_IDS if b != before.leader)
    after = wait_states(
        cluster,
        topic,
        lambda s: s[0].leader in survivors and s[0].isr == survivors,
        "a new leader and the ISR without the old one",
        survivors,
    )[0]
    assert after.leader in before.isr
    assert after.epoch == before.epoch + 1
    messages = read_all(clients, cluster.survivors(before.leader), topic, RECORDS)
    # Every acknowledged record exactly once, in the order produced, at consecutive offsets.
    assert acks == Acks(list(range(RECORDS)), [])
    assert [int(m.value()) for m in messages] == list(range(RECORDS))
    assert [m.offset() for m in messages] == list(range(RECORDS))
    epochs = [m.leader_epoch() for m in messages]
    assert epochs[0] == before.epoch and epochs[-1] == after.epoch
    assert epochs == sorted(epochs)
    cluster.start(before.leader)
    wait_states(cluster, topic, full_isr(1), "the old leader back in the ISR")


def test_restarted_follower_rejoins_the_isr_with_the_same_log(
    cluster: Cluster, request: pytest.FixtureRequest, clients: list[Any]
) -> None:
    topic = topic_name(request)
    # Leader 1; on its death the first live ISR member of the assignment, 2, takes over.
    created = NewTopic(
        topic, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}
    )
    create_topic(cluster, created)
    conf = {"enable.idempotence": True}
    first = produce_numbers(producer(clients, cluster.bootstrap, **conf), topic, range(100))
    cluster.kill(2)
    wait_states(cluster, topic, lambda s: s[0].isr == (1, 3), "the ISR without 2", (1, 3))
    second = produce_numbers(
        producer(clients, cluster.survivors(2), **conf), topic, range(100, 250)
    )
    assert (first.acked + second.acked, first.failed + second.failed) == (list(range(250)), [])
    cluster.start(2)
    wait_states(cluster, topic, full_isr(1), "the restarted follower back in the ISR")
    # A follower does not answer ListOffsets for consumers.
    with RawClient("127.0.0.1", cluster.port_of(2)) as raw:
        (answer,) = raw.request(list_offsets_request(topic, 0, -1)).topics
    assert int(answer.partitions[0].error_code) == NOT_LEADER_OR_FOLLOWER
    # Made leader, it serves exactly the log the old leader acknowledged.
    cluster.kill(1)
    wait_states(cluster, topic, lambda s: s[0].leader == 2, "2 leading", (2, 3))
    messages = read_all(clients, cluster.survivors(1), topic, 250)
    assert [(m.offset(), int(m.value())) for m in messages] == list(enumerate(range(250)))
    with RawClient("127.0.0.1", cluster.port_of(2)) as raw:
        (answer,) = raw.request(list_offsets_request(topic, 0, -1)).topics
    assert (int(answer.partitions[0].error_code), int(answer.partitions[0].offset)) == (0, 250)
    cluster.start(1)
    wait_states(cluster, topic, full_isr(1), "every replica back in the ISR")


def test_group_offsets_survive_the_coordinators_death(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    topic = topic_name(request)
    create_topic(cluster, new_topic(topic))
    group = f"cluster-diff-{uuid.uuid4().hex[:10]}"
    committed = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 7)])
    client = admin(cluster.bootstrap)
    wait_until(
        lambda: answered(lambda: client.alter_consumer_group_offsets([committed])[group]),
        WAIT, 0.2, "a group coordinator taking the commit",
    )  # fmt: skip
    coordinator = client.describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    old = coordinator.coordinator.id
    assert offsets_of(client, group) == [(topic, 0, 7)]
    cluster.kill(old)
    survivors = admin(cluster.survivors(old))

    def new_coordinator() -> bool:
        future = survivors.describe_consumer_groups([group])[group]
        answer = answered(lambda: future)
        return answer is not None and answer.coordinator.id != old

    wait_until(new_coordinator, WAIT, 0.2, "a new group coordinator")
    # Kafka's new coordinator answered no offsets once, right after taking over (1 run in 4).
    answers = [offsets_of(survivors, group)]
    deadline = time.monotonic() + 20
    while answers[-1] != [(topic, 0, 7)] and time.monotonic() < deadline:
        time.sleep(0.2)
        answers.append(offsets_of(survivors, group))
    assert answers[-1] == [(topic, 0, 7)]
    cluster.start(old)


def answered(call: Callable[[], Any]) -> Any:
    """The result of an admin future, or None when it failed or timed out (a coordinator still
    moving, or Kafka still creating __consumer_offsets)."""
    try:
        return call().result(CLIENT_TIMEOUT) or True
    except (KafkaException, concurrent.futures.TimeoutError):
        return None


def offsets_of(client: AdminClient, group: str) -> list[tuple[str, int, int]]:
    request = ConsumerGroupTopicPartitions(group)
    result = wait_until(
        lambda: answered(lambda: client.list_consumer_group_offsets([request])[group]),
        WAIT, 0.2, "the group's offsets",
    )  # fmt: skip
    return [(tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions]


def test_describe_configs_of_each_broker_names_its_id(cluster: Cluster) -> None:
    client = admin(cluster.bootstrap_of(1))
    for broker_id in BROKER_IDS:
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        entries = client.describe_configs([resource])[resource].result(CLIENT_TIMEOUT)
        assert entries["broker.id"].value == str(broker_id)


def test_every_broker_answers_the_same_metadata(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    topic = topic_name(request)
    states = create_topic(cluster, new_topic(topic, partitions=2))
    controller = int(metadata(cluster, 1).controller_id)
    others = [b for b in BROKER_IDS if b != controller]
    for broker_id in others:
        answer = admin(cluster.bootstrap_of(broker_id)).list_topics(topic, timeout=CLIENT_TIMEOUT)
        partitions = answer.topics[topic].partitions
        assert {p: tuple(m.replicas) for p, m in partitions.items()} == {
            p: s.replicas for p, s in states.items()
        }
        assert partition_states(cluster, broker_id, topic) == states


def test_deleted_topic_is_gone_from_every_broker(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    topic = topic_name(request)
    create_topic(cluster, new_topic(topic, partitions=2))
    admin(cluster.bootstrap).delete_topics([topic])[topic].result(CLIENT_TIMEOUT)
    for broker_id in BROKER_IDS:
        wait_until(
            lambda b=broker_id: topic_error(cluster, b, topic) == UNKNOWN_TOPIC_OR_PARTITION,
            WAIT, 0.1, f"{topic} gone from broker {broker_id}",
        )  # fmt: skip
    # Only once every broker has forgotten it: librdkafka asks any broker it knows for the
    # listing, not the one it bootstrapped from (on Kafka too, one still had it: 1 run).
    for broker_id in BROKER_IDS:
        listed = admin(cluster.bootstrap_of(broker_id)).list_topics(timeout=CLIENT_TIMEOUT)
        assert topic not in listed.topics


def test_kafka_topics_describes_the_placement(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    """Kafka's own kafka-topics.sh (TopicCommand 4.3.1) prints the same lines on both."""
    topic = topic_name(request)
    states = create_topic(cluster, new_topic(topic, partitions=2))
    run = run_tool("kafka-topics", cluster.bootstrap_of(2), "--describe", "--topic", topic)
    printed = re.sub(r"TopicId: \S+", "TopicId: <id>", run.stdout).splitlines()

    def ids(broker_ids: tuple[int, ...]) -> str:
        return ",".join(map(str, broker_ids))

    assert (run.exit_code, printed) == (
        0,
        [
            f"Topic: {topic}\tTopicId: <id>\tPartitionCount: 2\tReplicationFactor: 3\t"
            "Configs: min.insync.replicas=2",
            *(
                f"\tTopic: {topic}\tPartition: {p}\tLeader: {s.leader}\t"
                f"Replicas: {ids(s.replicas)}\tIsr: {ids(s.replicas)}\tElr: \tLastKnownElr: "
                for p, s in sorted(states.items())
            ),
        ],
    )


def spread_topic(cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """A topic with one single-replica partition on each broker: whichever broker coordinates
    a group or a transaction, two of the partitions live on the other brokers."""
    topic = topic_name(request)
    create = admin(cluster.bootstrap).create_topics(
        [NewTopic(topic, 3, replica_assignment=[[1], [2], [3]])]
    )
    create[topic].result(CLIENT_TIMEOUT)
    wait_states(cluster, topic, lambda s: len(s) == 3 and all(p.leader >= 0 for p in s.values()),
                "a leader for each partition")  # fmt: skip
    return topic


def test_group_commits_offsets_of_partitions_on_other_brokers(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    topic = spread_topic(cluster, request)
    group = f"cluster-diff-{uuid.uuid4().hex[:10]}"
    offsets = [TopicPartition(topic, p, 10 + p) for p in range(3)]
    client = admin(cluster.bootstrap)

    def committed() -> Any:
        request = ConsumerGroupTopicPartitions(group, offsets)
        return answered(lambda: client.alter_consumer_group_offsets([request])[group])

    result = wait_until(committed, WAIT, 0.2, "a group coordinator taking the commit")
    assert [(tp.partition, tp.offset, tp.error) for tp in result.topic_partitions] == [
        (0, 10, None), (1, 11, None), (2, 12, None),
    ]  # fmt: skip
    assert sorted(offsets_of(client, group)) == [(topic, 0, 10), (topic, 1, 11), (topic, 2, 12)]


def test_transaction_spans_partitions_on_every_broker(
    cluster: Cluster, request: pytest.FixtureRequest, clients: list[Any]
) -> None:
    topic = spread_topic(cluster, request)
    made = producer(
        clients, cluster.bootstrap, **{"transactional.id": f"cluster-diff-{uuid.uuid4().hex[:10]}"}
    )
    made.init_transactions(CLIENT_TIMEOUT)
    made.begin_transaction()
    acks = Acks([], [])
    for number in range(30):
        made.produce(topic, str(number).encode(), partition=number % 3, on_delivery=acks.callback)
    made.commit_transaction(CLIENT_TIMEOUT)
    assert (sorted(acks.acked), acks.failed) == (list(range(30)), [])
    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "cluster-diff-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    clients.append(reader)
    reader.assign([TopicPartition(topic, p, 0) for p in range(3)])
    read: list[tuple[int, int]] = []
    deadline = time.monotonic() + WAIT
    while len(read) < 30 and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            read.append((message.partition(), int(message.value())))
    assert sorted(read) == sorted((n % 3, n) for n in range(30))


def test_kafka_topics_describes_partitions_on_other_brokers(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    """kafka-topics.sh asks one broker (DescribeTopicPartitions): it answers every partition,
    also those it does not host."""
    topic = spread_topic(cluster, request)
    run = run_tool("kafka-topics", cluster.bootstrap_of(2), "--describe", "--topic", topic)
    printed = re.sub(r"TopicId: \S+", "TopicId: <id>", run.stdout).splitlines()
    assert (run.exit_code, printed) == (
        0,
        [
            f"Topic: {topic}\tTopicId: <id>\tPartitionCount: 3\tReplicationFactor: 1\t"
            "Configs: min.insync.replicas=2",
            *(
                f"\tTopic: {topic}\tPartition: {p}\tLeader: {p + 1}\tReplicas: {p + 1}\t"
                f"Isr: {p + 1}\tElr: \tLastKnownElr: "
                for p in range(3)
            ),
        ],
    )
