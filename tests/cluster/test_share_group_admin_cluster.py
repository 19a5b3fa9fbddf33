"""A share group administered on three `kafkalite serve` brokers, its group coordinator on
one broker and the share coordinator keeping its share-partition's state
(`__share_group_state`) and the partition's leader on others:

* its group config `share.auto.offset.reset=earliest`, set on a third broker (or the state
  leader), kept in ZooKeeper (`/config/groups/<group>`) and followed by every broker: a
  ShareConsumer reads what was produced before it joined;
* its offsets described (Kafka's kafka-share-groups, and DescribeShareGroupOffsets for named
  and for all topics), reset (a ShareConsumer then starts there) and deleted, and the group
  deleted with confluent-kafka's AdminClient (DeleteGroups): its state goes from the broker
  keeping it, through Kafka's share-state RPCs (broker/share_persister.py).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import KafkaException, Producer, ShareConsumer, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kio.schema.errors import ErrorCode

from compat.kafka_tools import run_tool
from kafkalite.share.share_records import kafka_uuid
from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, request_class

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow

TOPIC = "jobs"
RECORDS = 5
DEADLINE = 20.0
BROKERS = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.heartbeat.interval.ms": "500",
}
GROUP_KEY, SHARE_KEY = 0, 2  # FindCoordinator key types


def schema(api_key: int, version: int) -> Any:
    return __import__(request_class(api_key, version).__module__, fromlist=["_"])


def ask(broker: BrokerProcess, request: Any) -> Any:
    with RawClient(broker.host, broker.port) as client:
        return client.request(request)


def coordinator(broker: BrokerProcess, key_type: int, key: str) -> int | None:
    m = schema(10, 6)
    [found] = ask(
        broker, m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,))
    ).coordinators
    return found.node_id if found.error_code is ErrorCode.none else None


def placed_apart(broker: BrokerProcess, topic_id: uuid.UUID, leader: int) -> tuple[str, int, int]:
    """A group id whose group coordinator is neither the share coordinator of its
    share-partition of TOPIC-0 nor the partition's leader (its lag is asked of the leader);
    with the group and share coordinators."""
    for n in range(100):
        group = f"workers-{n}"
        share_key = f"{group}:{kafka_uuid(topic_id)}:0"
        found = poll(
            lambda g=group, k=share_key: (
                (c := coordinator(broker, GROUP_KEY, g)) is not None
                and (s := coordinator(broker, SHARE_KEY, k)) is not None
                and (c, s)
            ),
            "the coordinators",
        )
        if found[0] not in (found[1], leader):
            return group, found[0], found[1]
    raise AssertionError("no group coordinated apart from its state and partition leader")


def alter_group_config(broker: BrokerProcess, group: str, name: str, value: str) -> ErrorCode:
    m = schema(44, 1)
    config = m.AlterableConfig(name=name, config_operation=0, value=value)
    resource = m.AlterConfigsResource(resource_type=32, resource_name=group, configs=(config,))
    response = ask(
        broker, m.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
    )
    return response.responses[0].error_code


def config_value(broker: BrokerProcess, group: str, name: str) -> str:
    """The group config's value as this broker describes it."""
    m = schema(32, 4)
    resource = m.DescribeConfigsResource(
        resource_type=32, resource_name=group, configuration_keys=(name,)
    )
    request = m.DescribeConfigsRequest(
        resources=(resource,), include_synonyms=False, include_documentation=False
    )
    [result] = ask(broker, request).results
    return result.configs[0].value


def describe_offsets(broker: BrokerProcess, group: str, named: bool = True) -> list[tuple]:
    m = schema(90, 1)
    topics = (m.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=(0,)),)
    request = m.DescribeShareGroupOffsetsRequest(
        groups=(
            m.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=topics if named else None
            ),
        )
    )
    [described] = ask(broker, request).groups
    assert described.error_code is ErrorCode.none, described
    return [
        (t.topic_name, p.partition_index, p.start_offset, p.lag, p.error_code)
        for t in described.topics
        for p in t.partitions
    ]


def alter_offsets(broker: BrokerProcess, group: str, start_offset: int) -> Any:
    m = schema(91, 0)
    partition = m.AlterShareGroupOffsetsRequestPartition(
        partition_index=0, start_offset=start_offset
    )
    topic = m.AlterShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=(partition,))
    return ask(broker, m.AlterShareGroupOffsetsRequest(group_id=group, topics=(topic,)))


def delete_offsets(broker: BrokerProcess, group: str) -> Any:
    m = schema(92, 0)
    topic = m.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)
    return ask(broker, m.DeleteShareGroupOffsetsRequest(group_id=group, topics=(topic,)))


def state_summary(broker: BrokerProcess, group: str, topic_id: uuid.UUID) -> tuple[ErrorCode, int]:
    """What the share coordinator keeps of the group's share-partition TOPIC-0 (Kafka's
    ReadShareGroupStateSummary, as brokers ask it): its error and start offset."""
    m = schema(87, 1)
    partition = m.PartitionData(partition=0, leader_epoch=-1)
    topic = m.ReadStateSummaryData(topic_id=topic_id, partitions=(partition,))
    response = ask(broker, m.ReadShareGroupStateSummaryRequest(group_id=group, topics=(topic,)))
    [result] = response.results[0].partitions
    return result.error_code, result.start_offset


def consume(bootstrap: str, group: str, count: int) -> list[int]:
    """The offsets a ShareConsumer receives (each acknowledged, committed) until `count`,
    then one poll more (nothing else may come); it then closes, the group left empty."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([TOPIC])
    offsets: list[int] = []
    try:
        deadline = time.monotonic() + DEADLINE
        extra = 0
        while len(offsets) < count or extra < 2:
            assert time.monotonic() < deadline, f"received {offsets}"
            messages = consumer.poll(0.5)
            offsets += [m.offset() for m in messages if m.error() is None]
            if messages:
                consumer.commit_sync(10)
            extra += len(offsets) >= count
    finally:
        consumer.close()
    return sorted(offsets)


def until_empty(call: Any) -> Any:
    """The answer once the group is empty (a closed consumer leaves it at once, or its
    session expires)."""
    return poll(lambda: (r := call()).error_code != ErrorCode.non_empty_group and r, "empty group")


def test_group_configs_and_offsets_go_to_the_broker_keeping_the_state(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers(BROKERS)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    any_broker = brokers[1]
    described = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(DEADLINE)
    topic_id = uuid.UUID(
        int=(described.topic_id.get_most_significant_bits() % 2**64) << 64
        | described.topic_id.get_least_significant_bits() % 2**64
    )
    leader = admin.list_topics(TOPIC, timeout=DEADLINE).topics[TOPIC].partitions[0].leader
    group, group_coordinator, share_coordinator = placed_apart(any_broker, topic_id, leader)
    # The config set on a broker other than the group's coordinator.
    elsewhere = next(b for i, b in brokers.items() if i != group_coordinator)
    assert (
        alter_group_config(elsewhere, group, "share.auto.offset.reset", "earliest")
        is ErrorCode.none
    )
    poll(  # every broker follows the change (ZooKeeper's /config/changes)
        lambda: all(
            config_value(b, group, "share.auto.offset.reset") == "earliest"
            for b in brokers.values()
        ),
        "the group config on every broker",
    )
    resource = ConfigResource(ResourceType.GROUP, group)
    seen = admin.describe_configs([resource])[resource].result(DEADLINE)
    assert seen["share.auto.offset.reset"].value == "earliest"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=f"v{i}".encode())
    assert producer.flush(DEADLINE) == 0
    # Produced before anyone joined: read from offset 0 (the group's config, applied on the
    # coordinator's and the partition leader's brokers).
    assert consume(bootstrap, group, RECORDS) == list(range(RECORDS))

    coordinator_broker = brokers[group_coordinator]
    assert describe_offsets(coordinator_broker, group) == [(TOPIC, 0, 5, 0, ErrorCode.none)]
    assert describe_offsets(coordinator_broker, group, named=False) == [
        (TOPIC, 0, 5, 0, ErrorCode.none)
    ]
    tool = run_tool("kafka-share-groups", bootstrap, "--describe", "--group", group, "--offsets")
    assert tool.exit_code == 0, tool.stderr
    assert [line.split() for line in tool.stdout.splitlines() if line.strip()] == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        [group, TOPIC, "0", "5", "0"],
    ]

    altered = until_empty(lambda: alter_offsets(coordinator_broker, group, 2))
    assert altered.responses[0].partitions[0].error_code is ErrorCode.none
    assert describe_offsets(coordinator_broker, group) == [(TOPIC, 0, 2, 3, ErrorCode.none)]
    assert consume(bootstrap, group, 3) == [2, 3, 4]  # the partition leader starts there

    deleted = until_empty(lambda: delete_offsets(coordinator_broker, group))
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [(TOPIC, ErrorCode.none)]
    assert describe_offsets(coordinator_broker, group) == [(TOPIC, 0, -1, -1, ErrorCode.none)]
    # No state: the share-partition starts where share.auto.offset.reset says again.
    assert consume(bootstrap, group, RECORDS) == list(range(RECORDS))

    poll(lambda: _deleted(admin, group), "the group deleted")
    assert describe_offsets(coordinator_broker, group, named=False) == []
    assert state_summary(brokers[share_coordinator], group, topic_id) == (ErrorCode.none, -1)
    with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups([group])[group].result(DEADLINE)


def _deleted(admin: AdminClient, group: str) -> bool:
    """DeleteGroups of the (empty) share group; False while it still has members."""
    try:
        admin.delete_consumer_groups([group])[group].result(DEADLINE)
    except Exception as exc:  # NON_EMPTY_GROUP until the closed consumer has left
        if "NON_EMPTY_GROUP" in str(exc):
            return False
        raise
    return True
