"""Failover before the ZooKeeper session expires (cluster/broker_liveness.py), on real processes:
a real ZooKeeper, three `kafkalite serve` brokers with Kafka's default
zookeeper.session.timeout.ms (18 s), replication factor 3 and min.insync.replicas=2.

* SIGKILL of a partition's leader (the controller itself, or another broker) under idempotent
  acks=all load: a new leader takes the writes, every acknowledged record is read back exactly
  once and in order. The failover time (kill to the first acks=all write acknowledged after
  it) is printed, not asserted: speed lives in bench/.
* SIGSTOP of the leader, shorter than the session but past the probe timeout: it is replaced
  while its session lives; resumed, it acknowledges no acks=all write and serves nothing the
  new leader lacks, and every acknowledged record is there exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.storage.batch import iter_batches
from kafkalite.storage.records import decode_records, encode_batch
from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, fetch_request, produce_request, response_class

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow

RECORDS = 2000
KILL_AFTER = 600
WAIT = 60.0
CLUSTER = {
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "zookeeper.session.timeout.ms": "18000",  # Kafka's default: the probes must beat it
    "kafkalite.liveness.probe.timeout.ms": "3000",
    # Teardown only: the last broker's controlled shutdown would retry for the killed one,
    # registered until its session expires, with nothing it could move.
    "controlled.shutdown.enable": "false",
}


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> Iterator[dict[int, BrokerProcess]]:
    processes = start_brokers(CLUSTER)
    try:
        yield processes
    finally:  # a paused broker would not stop
        for broker in processes.values():
            if broker.process is not None and broker.process.poll() is None:
                os.kill(broker.process.pid, signal.SIGCONT)


def create_topic(brokers: dict[int, BrokerProcess], topic: str, partitions: int) -> AdminClient:
    poll(  # CreateTopics may go to any of them
        lambda: all(knows_all_brokers(b.bootstrap) for b in brokers.values()),
        "every broker knowing all 3",
    )
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    poll(
        lambda: (
            len(ps := partitions_of(admin, topic)) == partitions
            and all(len(p.isrs) == 3 for p in ps.values())
        ),
        "full ISRs",
    )
    return admin


def knows_all_brokers(address: str) -> bool:
    admin = AdminClient({"bootstrap.servers": address})
    return len(admin.list_topics(timeout=10).brokers) == 3


def partitions_of(admin: AdminClient, topic: str) -> dict[int, Any]:
    found = admin.list_topics(topic, timeout=10).topics[topic]
    return found.partitions if found.error is None else {}


def new_leader(admin: AdminClient, topic: str, partition: int, old: int) -> int:
    def leader() -> int | None:
        p = partitions_of(admin, topic).get(partition)
        return p.leader if p is not None and p.leader not in (-1, old) else None

    return int(poll(leader, "a new leader"))


def read_back(bootstrap: str, topic: str, partition: int, expected: int) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    read: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + WAIT
        while len(read) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(int(message.value()))
        # Anything past the expected count would be a duplicate or a record never acked.
        extra = consumer.poll(1.0)
        if extra is not None and extra.error() is None:
            read.append(int(extra.value()))
    finally:
        consumer.close()
    return read


def idempotent_producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
        }
    )


@pytest.mark.parametrize("victim", ["controller", "other broker"])
def test_a_killed_leader_is_replaced_before_its_session_expires(
    brokers: dict[int, BrokerProcess], victim: str
) -> None:
    topic = "fast-failover"
    admin = create_topic(brokers, topic, 3)
    controller = admin.list_topics(timeout=10).controller_id
    # Round-robin assignment over 3 brokers: each leads one of the 3 partitions.
    partition, leader = next(
        (index, p.leader)
        for index, p in sorted(partitions_of(admin, topic).items())
        if (p.leader == controller) == (victim == "controller")
    )
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    producer = idempotent_producer(bootstrap)
    acked: list[int] = []
    failed: list[int] = []
    killed_at: list[float] = []
    first_after_kill: list[float] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(int(message.value()))
            return
        acked.append(int(message.value()))
        if killed_at and not first_after_kill:
            first_after_kill.append(time.monotonic())

    def maybe_kill() -> None:
        if not killed_at and len(acked) >= KILL_AFTER:
            brokers[leader].kill()
            killed_at.append(time.monotonic())

    for number in range(RECORDS):
        producer.produce(topic, str(number).encode(), partition=partition, on_delivery=delivered)
        producer.poll(0)
        maybe_kill()
        while len(producer) > 100:  # a bounded backlog keeps the kill mid-stream
            producer.poll(0.01)
            maybe_kill()
    assert producer.flush(WAIT * 2) == 0
    assert killed_at and failed == []
    failover = first_after_kill[0] - killed_at[0]
    print(f"\nfailover after SIGKILL of the {victim} (leader {leader}): {failover:.2f} s")

    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != leader)
    survivors_admin = AdminClient({"bootstrap.servers": survivors})
    assert new_leader(survivors_admin, topic, partition, leader) != leader
    read = read_back(survivors, topic, partition, RECORDS)
    assert read == list(range(RECORDS)) == sorted(acked)


def test_a_paused_leader_is_replaced_and_fenced_when_it_resumes(
    brokers: dict[int, BrokerProcess],
) -> None:
    topic = "paused-leader"
    admin = create_topic(brokers, topic, 1)
    leader = partitions_of(admin, topic)[0].leader
    old = brokers[leader]
    assert old.process is not None
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    producer = idempotent_producer(bootstrap)
    for number in range(500):
        producer.produce(topic, str(number).encode(), partition=0)
    assert producer.flush(WAIT) == 0

    os.kill(old.process.pid, signal.SIGSTOP)
    paused_at = time.monotonic()
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != leader)
    survivors_admin = AdminClient({"bootstrap.servers": survivors})
    successor = new_leader(survivors_admin, topic, 0, leader)
    replaced = time.monotonic() - paused_at
    print(f"\npaused leader {leader} replaced by {successor} after {replaced:.2f} s")
    producer = idempotent_producer(survivors)
    for number in range(500, 1000):
        producer.produce(topic, str(number).encode(), partition=0)
    assert producer.flush(WAIT) == 0

    # Requests queued on the paused process: it reads them as soon as it resumes, possibly
    # before it has learned that it was replaced.
    with RawClient(old.host, old.port, timeout=WAIT) as client:
        client.send(produce_request(topic, 0, one_record(b"-1"), acks=1, timeout_ms=5000))
        client.send(produce_request(topic, 0, one_record(b"-2"), acks=-1, timeout_ms=5000))
        client.send(fetch_request(topic, 0, 0))
        os.kill(old.process.pid, signal.SIGCONT)
        acks_one, acks_all, fetched = receive_answers(client)
    print(f"resumed leader answered: acks=1 {acks_one}, acks=all {acks_all}, fetch {fetched}")
    # acks=all never succeeds on the replaced leader; acks=1 may land in its log, beyond what
    # consumers may read, and is truncated when it follows the new leader.
    assert acks_all.error_code != 0
    assert fetched.error_code != 0 or fetched.high_watermark <= 500
    assert acks_one.error_code != 0 or acks_one.base_offset >= 500

    poll(
        lambda: leader in partitions_of(survivors_admin, topic)[0].isrs,
        "the resumed broker back in the ISR",
    )
    assert read_back(survivors, topic, 0, 1000) == list(range(1000))
    # Back in the ISR, it holds exactly the new leader's log: its own acks=1 write truncated.
    assert values_on_disk(old, topic, 0) == [str(n).encode() for n in range(1000)]


def values_on_disk(broker: BrokerProcess, topic: str, partition: int) -> list[bytes | None]:
    values = []
    for segment in sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        for position, header in iter_batches(data):
            batch = memoryview(data)[position : position + header.size]
            values += [record.value for record in decode_records(batch)]
    return values


def one_record(value: bytes) -> bytes:
    return encode_batch([(None, value)], timestamp=int(time.time() * 1000))


def receive_answers(client: RawClient) -> tuple[Any, Any, Any]:
    answers = []
    for api_key, version in ((0, 9), (0, 9), (1, 12)):
        _, response = client.recv(response_class(api_key, version))
        answers.append(response)
    produce_one, produce_all, fetch = answers
    return (
        produce_one.responses[0].partition_responses[0],
        produce_all.responses[0].partition_responses[0],
        fetch.responses[0].partitions[0],
    )
