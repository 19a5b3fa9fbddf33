"""Three `kafkalite serve` processes on a real ZooKeeper, seen through confluent-kafka's
AdminClient: a replicated topic's leaders spread over the brokers, replication factor 4
refused, a SIGKILLed broker's partitions led again (bumped leader epochs) within the session
timeout, and a new controller (controller epoch + 1) when the controller is killed."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from cluster_helpers import CLUSTER_SESSION_TIMEOUT_MS, StartBrokers, poll, zk_read
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess, error_records

pytestmark = pytest.mark.slow


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers({})


def partitions(admin: AdminClient, topic: str) -> dict[int, Any]:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


def all_partitions(admin: AdminClient, topic: str, count: int) -> dict[int, Any]:
    """CreateTopics answers once the broker it went to has the states; the broker answering
    Metadata may learn them (through its watch) just after."""
    return poll(lambda: len(found := partitions(admin, topic)) == count and found, topic)


def test_three_brokers_spread_leaders_and_fail_over(
    brokers: dict[int, BrokerProcess], zk_connect: str
) -> None:
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic("replicated", 6, 3)])["replicated"].result(30)
    created = all_partitions(admin, "replicated", 6)
    assert Counter(p.leader for p in created.values()) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(p.replicas) == sorted(p.isrs) == [1, 2, 3] for p in created.values())

    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("too-wide", 6, 4)])["too-wide"].result(30)
    error: KafkaError = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert error.str() == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
        "cannot be reached because only 3 broker(s) are registered."
    )

    # A manual assignment is the placement; the first replica leads.
    manual = NewTopic("manual", 2, replica_assignment=[[3, 1, 2], [2, 3, 1]])
    admin.create_topics([manual])["manual"].result(30)
    placed = all_partitions(admin, "manual", 2)
    assert {i: (p.leader, p.replicas) for i, p in placed.items()} == {
        0: (3, [3, 1, 2]),
        1: (2, [2, 3, 1]),
    }
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("nowhere", 1, replica_assignment=[[1, 9]])])[
            "nowhere"
        ].result(30)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert error.str() == (
        "The manual partition assignment includes broker 9, but no such broker is registered."
    )

    # SIGKILL a broker that is not the controller: its partitions get other leaders.
    controller = zk_read(zk_connect, lambda z: z.controller_id())
    victim = next(b for b in (1, 2, 3) if b != controller)
    led = {i for i, p in created.items() if p.leader == victim}
    started = time.monotonic()
    brokers[victim].kill()
    survivors = [b for b in (1, 2, 3) if b != victim]
    admin = AdminClient({"bootstrap.servers": ",".join(brokers[b].bootstrap for b in survivors)})

    def failed_over() -> bool:
        now = partitions(admin, "replicated")
        return all(p.leader in survivors and victim not in p.isrs for p in now.values())

    poll(failed_over, "new leaders")
    assert time.monotonic() - started < 2 * CLUSTER_SESSION_TIMEOUT_MS / 1000 + 5
    states = zk_read(
        zk_connect,
        lambda z: _gather([z.partition_state("replicated", i) for i in range(6)]),
    )
    assert all(s.state.leader_epoch == 1 for s in states)  # each one decision since creation
    assert {i for i, s in enumerate(states) if s.state.leader != victim} >= led
    assert all(sorted(p.replicas) == [1, 2, 3] for p in partitions(admin, "replicated").values())

    # Kill the controller: the remaining broker takes over with the next epoch.
    before = zk_read(zk_connect, lambda z: z.controller_epoch())
    brokers[controller].kill()
    last = next(b for b in survivors if b != controller)
    poll(lambda: zk_read(zk_connect, lambda z: z.controller_id()) == last, "a new controller")
    after = zk_read(zk_connect, lambda z: z.controller_epoch())
    assert after.epoch == before.epoch + 1
    admin = AdminClient({"bootstrap.servers": brokers[last].bootstrap})
    poll(
        lambda: all(p.leader == last for p in partitions(admin, "replicated").values()),
        "every partition led by the last broker",
    )
    assert [error_records(b.lines) for b in brokers.values()] == [[], [], []]


async def _gather(reads: list[Any]) -> list[Any]:
    return [await read for read in reads]
