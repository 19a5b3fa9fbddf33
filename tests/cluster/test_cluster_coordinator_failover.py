"""Coordinator failover on real processes: a real ZooKeeper, three `kafkalite serve` brokers,
`__consumer_offsets` with replication factor 3. The group coordinator is SIGKILLed while a
consumer commits: the new leader of the group's partition serves exactly the last
acknowledged offset (never an older one) and takes commits; a coordinator paused past its
ZooKeeper session answers NOT_COORDINATOR once resumed. The transaction coordinator killed
mid-transaction: the producer re-initialised on the new one finds its committed transaction
complete and the open one aborted. The chaos runs found offsets going
backwards when the new leader never loaded the partition."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from kafkalite.testing import BrokerProcess, error_records
from protocol_tests.raw_client import RawClient, metadata_request
from protocol_tests.test_wire_groups import commit_request

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow

TOPIC = "committed"
GROUP = "failover-group"
OFFSETS = "__consumer_offsets"
WAIT = 60.0


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers(
        {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1"}
    )


def leader_of(admin: AdminClient, topic: str) -> int | None:
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None or 0 not in found.partitions:
        return None
    partition = found.partitions[0]
    return partition.leader if partition.leader >= 0 and len(partition.isrs) == 3 else None


def start(brokers: dict[int, BrokerProcess]) -> tuple[AdminClient, Consumer]:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    poll(lambda: leader_of(admin, TOPIC), "a full ISR")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    return admin, consumer


def commit(consumer: Consumer, offset: int) -> bool:
    """True when the commit of `offset` was acknowledged."""
    try:
        answer = consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    except KafkaException:
        return False
    return answer is not None and answer[0].error is None


def committed(consumer: Consumer) -> Any:
    try:
        return consumer.committed([TopicPartition(TOPIC, 0)], timeout=5)[0].offset
    except KafkaException:
        return None


def test_the_new_coordinator_serves_the_last_acknowledged_offset(
    brokers: dict[int, BrokerProcess],
) -> None:
    admin, consumer = start(brokers)
    try:
        assert [commit(consumer, offset) for offset in range(1, 21)] == [True] * 20
        old = poll(lambda: leader_of(admin, OFFSETS), "a full ISR of the offsets topic")
        brokers[old].kill()
        # The first answer after the failover, before any other commit, is the last
        # acknowledged offset (it was 20 only if the new leader loaded the partition).
        first_answer = poll(lambda: [offset] if (offset := committed(consumer)) else None, "answer")
        assert first_answer == [20]
        assert [commit(consumer, offset) for offset in range(21, 26)] == [True] * 5
        assert committed(consumer) == 25
        # No ERROR on the survivors (brokers racing to create `__consumer_offsets` logged one).
        survivors = [b for i, b in brokers.items() if i != old]
        assert [error_records(b.lines) for b in survivors] == [[], []]
    finally:
        consumer.close()


def test_a_resumed_coordinator_answers_not_coordinator(
    brokers: dict[int, BrokerProcess],
) -> None:
    admin, consumer = start(brokers)
    try:
        assert [commit(consumer, offset) for offset in range(1, 11)] == [True] * 10
        old = poll(lambda: leader_of(admin, OFFSETS), "a full ISR of the offsets topic")
        paused = brokers[old]
        assert paused.process is not None
        survivor = next(b for i, b in brokers.items() if i != old)
        paused.process.send_signal(signal.SIGSTOP)
        try:
            # Asked of a survivor, not of a client that may ask the paused broker.
            with RawClient(survivor.host, survivor.port) as asked:
                poll(lambda: offsets_leader(asked) not in (-1, old), "a new offsets leader")
        finally:
            paused.process.send_signal(signal.SIGCONT)
        # The resumed broker learns it lost the partition and stops serving the group (a
        # commit it took meanwhile could not be acknowledged: its followers left it).
        request = commit_request(GROUP, -1, "", TOPIC, 99, "")
        with RawClient(paused.host, paused.port) as client:
            poll(
                lambda: (
                    client.request(request).topics[0].partitions[0].error_code
                    == ErrorCode.not_coordinator
                ),
                "NOT_COORDINATOR from the resumed broker",
            )
        assert commit(consumer, 11)
        assert committed(consumer) == 11
    finally:
        consumer.close()


def offsets_leader(client: RawClient) -> int:
    """The leader of `__consumer_offsets`-0 as the broker behind `client` knows it."""
    topic = client.request(metadata_request([OFFSETS], auto_create=False)).topics[0]
    return topic.partitions[0].leader_id if topic.partitions else -1


TXN_TOPIC = "txn-data"
TXN_STATE = "__transaction_state"
TID = "failover-txn"


def replicas_and_leader(admin: AdminClient, topic: str) -> tuple[list[int], int] | None:
    try:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
    except KafkaException:
        return None
    if found is None or found.error is not None or 0 not in found.partitions:
        return None
    partition = found.partitions[0]
    return list(partition.replicas), partition.leader


def read_committed(bootstrap: str, expected: int) -> list[bytes]:
    """Everything a read_committed consumer gets, up to the end of the partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-check",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TXN_TOPIC, 0, 0)])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF and len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def test_a_new_transaction_coordinator_aborts_the_open_transaction(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers({"transaction.state.log.num.partitions": "1"})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    config = {"bootstrap.servers": bootstrap, "transactional.id": TID}
    producer = Producer(config)
    producer.init_transactions(WAIT)  # creates `__transaction_state`
    replicas, coordinator = poll(lambda: replicas_and_leader(admin, TXN_STATE), "its leader")
    # The data partition is placed as the coordinator's, so both move to the same broker
    # and the abort marker is the new coordinator's own write.
    created = admin.create_topics([NewTopic(TXN_TOPIC, 1, replica_assignment=[replicas])])
    created[TXN_TOPIC].result(30)
    poll(lambda: replicas_and_leader(admin, TXN_TOPIC) == (replicas, coordinator), "data leader")

    producer.begin_transaction()
    for number in range(10):
        producer.produce(TXN_TOPIC, b"committed-%d" % number, partition=0)
    producer.commit_transaction(WAIT)
    producer.begin_transaction()
    for number in range(5):
        producer.produce(TXN_TOPIC, b"open-%d" % number, partition=0)
    assert producer.flush(WAIT) == 0  # written and acknowledged, never committed
    brokers[coordinator].kill()

    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != coordinator)
    admin = AdminClient({"bootstrap.servers": survivors})

    def moved() -> bool:
        state = replicas_and_leader(admin, TXN_STATE)
        data = replicas_and_leader(admin, TXN_TOPIC)
        return bool(state and data and state[1] not in (-1, coordinator) and state[1] == data[1])

    poll(moved, "a new coordinator leading the data partition too")
    again = Producer({**config, "bootstrap.servers": survivors})
    again.init_transactions(WAIT)  # fences the first producer, aborts its open transaction
    again.begin_transaction()
    for number in range(7):
        again.produce(TXN_TOPIC, b"after-%d" % number, partition=0)
    again.commit_transaction(WAIT)

    expected = [b"committed-%d" % n for n in range(10)] + [b"after-%d" % n for n in range(7)]
    assert read_committed(survivors, len(expected)) == expected
