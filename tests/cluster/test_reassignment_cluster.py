"""Partition reassignment on real processes: a real ZooKeeper, three `kafkalite serve` brokers,
Kafka's own `kafka-reassign-partitions` (4.3 tools, compat/kafka_tools.py) pointed at a broker
that is not the controller. A partition on brokers [1, 2], led by 1, moves to [2, 3] while an
idempotent acks=all producer writes a numbered stream (before, during and after the move): the
new replica catches up, leadership leaves broker 1, broker 1 deletes its replica, and broker 3
alone (broker 2 stopped) serves every acknowledged record exactly once, in order. Then the
errors, ListPartitionReassignments and a cancellation, over the wire."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from compat.kafka_tools import ToolRun, run_tool
from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, build

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow

TOPIC = "moving"
RECORDS = 2000  # produced after the move completed
MOVE_AFTER = 500  # acknowledged records before the reassignment starts
WAIT = 60.0


def partition_info(admin: AdminClient) -> Any:
    topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return topic.partitions[0] if topic.error is None and 0 in topic.partitions else None


def reassign(bootstrap: str, plan: Path, action: str) -> ToolRun:
    return run_tool(
        "kafka-reassign-partitions", bootstrap, "--reassignment-json-file", str(plan), action
    )


def read_all(bootstrap: str, expected: int) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[int] = []
        deadline = time.monotonic() + WAIT
        while len(read) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(int(message.value()))
        return read
    finally:
        consumer.close()


def test_a_partition_moves_under_acks_all_load(start_brokers: StartBrokers, tmp_path: Path) -> None:
    brokers: dict[int, BrokerProcess] = start_brokers({"min.insync.replicas": "1"})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2]])])[TOPIC].result(30)
    poll(lambda: (p := partition_info(admin)) and p.leader == 1 and len(p.isrs) == 2, "ISR [1, 2]")
    assert (brokers[1].data_dir / f"{TOPIC}-0").is_dir()
    controller = admin.describe_cluster().result(10).controller.id
    asked = next(b for i, b in brokers.items() if i != controller)
    plan = tmp_path / "plan.json"
    target = {"topic": TOPIC, "partition": 0, "replicas": [2, 3]}
    plan.write_text(json.dumps({"version": 1, "partitions": [target]}))

    acked: list[int] = []
    failed: list[int] = []
    runs: dict[str, ToolRun] = {}
    moved = threading.Event()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )

    def delivered(error: Any, message: Any) -> None:
        (failed if error is not None else acked).append(int(message.value()))

    def move() -> None:
        runs["execute"] = reassign(asked.bootstrap, plan, "--execute")
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            runs["verify"] = reassign(asked.bootstrap, plan, "--verify")
            if "is completed" in runs["verify"].stdout:
                break
        moved.set()

    mover = threading.Thread(target=move)
    number, acked_when_moved = 0, -1
    # Writes go on, at a trickle, until the move is done, then RECORDS more.
    while acked_when_moved < 0 or number < acked_when_moved + RECORDS:
        producer.produce(TOPIC, str(number).encode(), partition=0, on_delivery=delivered)
        number += 1
        producer.poll(0)
        if not mover.is_alive() and not moved.is_set() and len(acked) >= MOVE_AFTER:
            mover.start()
        if moved.is_set() and acked_when_moved < 0:
            acked_when_moved = len(acked)
        while len(producer) > (50 if mover.is_alive() else 200):
            producer.poll(0.05)
    mover.join(WAIT)
    assert producer.flush(WAIT) == 0
    assert runs["execute"].exit_code == 0, runs["execute"].stdout + runs["execute"].stderr
    assert "Successfully started partition reassignment" in runs["execute"].stdout
    assert f"Reassignment of partition {TOPIC}-0 is completed." in runs["verify"].stdout
    assert MOVE_AFTER <= acked_when_moved < number
    info = poll(
        lambda: (p := partition_info(admin)) and p.replicas == [2, 3] and p, "replicas [2, 3]"
    )
    assert (info.leader, sorted(info.isrs)) == (2, [2, 3])
    assert failed == [] and len(acked) == number
    poll(lambda: not (brokers[1].data_dir / f"{TOPIC}-0").exists(), "broker 1 deleting its replica")

    brokers[2].stop()  # broker 3, the new replica, alone must serve all of it
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != 2)
    admin = AdminClient({"bootstrap.servers": survivors})
    poll(lambda: (p := partition_info(admin)) and p.leader == 3, "broker 3 leading")
    read = read_all(brokers[3].bootstrap, number)
    assert read == list(range(number))


def alter_request(replicas: list[int] | None, topic: str = TOPIC, partition: int = 0) -> Any:
    entry = build(45, 0, "ReassignablePartition", partition_index=partition, replicas=replicas)
    topics = (build(45, 0, "ReassignableTopic", name=topic, partitions=(entry,)),)
    return build(45, 0, "AlterPartitionReassignmentsRequest", topics=topics)


def alter(broker: BrokerProcess, replicas: list[int] | None, **where: Any) -> Any:
    with RawClient(broker.host, broker.port) as client:
        response = client.request(alter_request(replicas, **where))
    assert response.error_code is ErrorCode.none, response
    (result,) = response.responses[0].partitions
    return result.error_code, result.error_message


def ongoing(broker: BrokerProcess) -> list[tuple[str, int, tuple[int, ...], tuple[int, ...]]]:
    request = build(46, 0, "ListPartitionReassignmentsRequest", topics=None)
    with RawClient(broker.host, broker.port) as client:
        response = client.request(request)
    assert response.error_code is ErrorCode.none, response
    return [
        (t.name, p.partition_index, p.replicas, p.adding_replicas)
        for t in response.topics
        for p in t.partitions
    ]


def test_errors_listing_and_cancellation(start_brokers: StartBrokers) -> None:
    brokers = start_brokers({})
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    controller_id = admin.describe_cluster().result(10).controller.id
    a, b = (i for i in brokers if i != controller_id)
    controller = brokers[controller_id]
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[controller_id, a]])])[
        TOPIC
    ].result(30)
    poll(lambda: (p := partition_info(admin)) and len(p.isrs) == 2, "a full ISR")

    with RawClient(brokers[a].host, brokers[a].port) as client:
        refused = client.request(alter_request([controller_id, a, b]))
    assert (refused.error_code, refused.responses) == (ErrorCode.not_controller, ())
    assert alter(controller, [a, a]) == (
        ErrorCode.invalid_replica_assignment,
        f"Duplicate replica ids in partition reassignment replica list: [{a}, {a}]",
    )
    assert alter(controller, [controller_id, 9])[0] is ErrorCode.invalid_replica_assignment
    assert alter(controller, [a], partition=5) == (
        ErrorCode.unknown_topic_or_partition,
        "The partition does not exist.",
    )
    assert alter(controller, None) == (ErrorCode.no_reassignment_in_progress, None)
    assert ongoing(controller) == []

    # Broker b paused: registered still, but never catching up, so the move stays in progress.
    paused = brokers[b].process
    assert paused is not None
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        assert alter(controller, [controller_id, a, b]) == (ErrorCode.none, None)
        assert ongoing(controller) == [(TOPIC, 0, (controller_id, a, b), (b,))]
        assert alter(controller, None) == (ErrorCode.none, None)  # cancel
        assert ongoing(controller) == []
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    poll(lambda: (p := partition_info(admin)) and p.replicas == [controller_id, a], "reverted")
