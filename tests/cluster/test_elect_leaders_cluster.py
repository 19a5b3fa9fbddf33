"""Leader elections on real processes (a real ZooKeeper, three `kafkalite serve` brokers):
ElectLeaders from confluent-kafka's AdminClient, from Kafka's own kafka-leader-election tool and
sent to a broker that is not the controller (forwarded), and the automatic rebalance moving a
leader back to its preferred replica."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import trio
from cluster_helpers import StartBrokers, poll, zk_read
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from compat.kafka_tools import run_tool
from kafkalite.broker.broker_connection import BrokerConnection
from kafkalite.testing import BrokerProcess

pytestmark = pytest.mark.slow
TOPIC = "elect"
ASSIGNMENT = [[1, 2, 3], [2, 3, 1]]  # preferred leaders 1 and 2


def create(admin: AdminClient) -> None:
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 2, replica_assignment=ASSIGNMENT)])[TOPIC].result(30)
    poll(lambda: isrs(admin) == {0: 3, 1: 3}, "full ISRs")


def isrs(admin: AdminClient) -> dict[int, int]:
    found = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    return {p: len(m.isrs) for p, m in found.items()}


def leader(admin: AdminClient, partition: int) -> int:
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[partition].leader


def elect(admin: AdminClient, partitions: list[tuple[str, int]] | None) -> dict[Any, Any]:
    named = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    results = admin.elect_leaders(ElectionType.PREFERRED, named).result(timeout=30)
    return {
        (tp.topic, tp.partition): None if error is None else error.code()
        for tp, error in results.items()
    }


def send_elect_leaders(broker: BrokerProcess, partitions: list[int]) -> Any:
    request = ElectLeadersRequest(
        election_type=i8(0),
        topic_partitions=(
            TopicPartitions(topic=TOPIC, partitions=tuple(i32(p) for p in partitions)),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
    )

    async def main() -> Any:
        connection = await BrokerConnection.open(broker.host, broker.port, "test")
        try:
            return await connection.request(request)
        finally:
            await connection.aclose()

    return trio.run(main)


def test_elect_leaders_from_admin_clients_and_kafkas_tool(
    start_brokers: StartBrokers, zk_connect: str
) -> None:
    brokers = start_brokers({"auto.leader.rebalance.enable": "false"})
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    create(admin)
    assert elect(admin, None) == {}  # every leader is the preferred one
    assert elect(admin, [(TOPIC, 0), (TOPIC, 5), ("nope", 0)]) == {
        (TOPIC, 0): KafkaError.ELECTION_NOT_NEEDED,
        (TOPIC, 5): KafkaError.UNKNOWN_TOPIC_OR_PART,
        ("nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }

    brokers[1].stop()  # controlled shutdown: elect-0 moves to broker 2
    assert leader(admin, 0) == 2
    assert elect(admin, [(TOPIC, 0)]) == {(TOPIC, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
    tool = run_tool(
        "kafka-leader-election",
        brokers[2].bootstrap,
        *("--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "0"),
    )
    assert tool.exit_code == 1
    assert tool.stdout.splitlines()[0] == (
        "Error completing leader election (PREFERRED) for partition: elect-0: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: "
        "The preferred leader was not available."
    )

    brokers[1].start()
    poll(lambda: isrs(admin) == {0: 3, 1: 3}, "broker 1 back in the ISRs")
    before = zk_read(zk_connect, lambda zk: zk.partition_state(TOPIC, 0)).state
    tool = run_tool(
        "kafka-leader-election",
        brokers[3].bootstrap,
        *("--election-type", "PREFERRED", "--all-topic-partitions"),
    )
    assert (tool.exit_code, tool.stdout.splitlines()) == (
        0,
        ["Successfully completed leader election (PREFERRED) for partitions elect-0"],
    )
    after = zk_read(zk_connect, lambda zk: zk.partition_state(TOPIC, 0)).state
    assert (after.leader, after.leader_epoch, after.isr) == (1, before.leader_epoch + 1, before.isr)
    assert leader(admin, 0) == 1  # the controller answered once the metadata had it

    # A broker that is not the controller forwards the request.
    controller_id = zk_read(zk_connect, lambda zk: zk.controller_id())
    other = next(b for b in (1, 2, 3) if b != controller_id)
    response = send_elect_leaders(brokers[other], [0, 1])
    assert response.error_code == ErrorCode.none
    [topic] = response.replica_election_results
    assert [(r.partition_id, r.error_code) for r in topic.partition_result] == [
        (0, ErrorCode.election_not_needed),
        (1, ErrorCode.election_not_needed),
    ]
    tool = run_tool(
        "kafka-leader-election",
        brokers[other].bootstrap,
        *("--election-type", "UNCLEAN", "--topic", TOPIC, "--partition", "1"),
    )
    assert (tool.exit_code, tool.stdout.splitlines()) == (
        0,
        ["Valid replica already elected for partitions elect-1"],
    )


def test_auto_rebalance_moves_leaders_back_to_preferred_replicas(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers({"leader.imbalance.check.interval.seconds": "1"})
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    create(admin)
    brokers[1].restart()  # controlled shutdown moves elect-0 to broker 2, then broker 1 returns
    poll(lambda: leader(admin, 0) == 1, "elect-0 back on its preferred replica")
    assert leader(admin, 1) == 2
    moves = [line for b in brokers.values() for line in b.lines if "leader rebalance" in line]
    assert any("elect-0 (preferred leader rebalance): leader 1," in line for line in moves)
