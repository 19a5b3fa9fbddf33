"""Transactions on three `kafkalite serve` processes (real ZooKeeper): the coordinator sends
WriteTxnMarkers to partitions led by the other brokers (kafkalite/broker/txn_marker_sender.py).

- A transaction over partitions led by brokers 1, 2 and 3 commits and aborts: read_committed
  sees exactly the committed records, read_uncommitted all of them, each partition's end one
  offset past its records per transaction (one marker each).
- A transactional batch for a partition outside the producer's transaction is refused by
  its leader after asking the coordinator on another broker (KIP-890 verification).
- Apache Kafka's Java transactional producer commits and aborts over the same partitions.
- A partition's leader SIGKILLed after the transaction's records are replicated and before
  EndTxn: the coordinator's marker for it fails until the controller elects a new leader,
  then reaches that leader; readers see the transaction committed there.
- send_offsets_to_transaction when the group's coordinator is not the transactional id's:
  the group coordinator asks the transaction coordinator (it answered
  INVALID_PRODUCER_ID_MAPPING from its own, empty, transaction state) and the committed
  transaction's offsets are the group's.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.broker.txn_coordinator_service import TXN_STATE_TOPIC, txn_partition
from kafkalite.coordinator import group_partition
from kafkalite.storage.batch import TRANSACTIONAL_FLAG
from kafkalite.storage.records import encode_batch
from kafkalite.testing import BrokerProcess, error_records
from protocol_tests.raw_client import RawClient, init_producer_id_request, produce_request
from tests.integration.e2e_helpers import read_to_end, watermarks

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow

TOPIC = "txn-spread"
TXN_STATE_PARTITIONS = 3
OFFSETS_PARTITIONS = 3
CLIENT_TIMEOUT = 60.0
# Each partition i is led by broker i + 1, its replicas on all three.
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
JAVA_PRODUCER = Path(__file__).with_name("java") / "JavaTxnProducer.java"


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers(
        {
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        }
    )


def errors_logged(broker: BrokerProcess) -> list[str]:
    """ERROR lines. The brokers' concurrent creations of `__consumer_offsets` (the readers'
    group.id makes each broker they ask create it) log none: a lost race is INFO, and too few
    brokers alive for its replication factor a WARNING (answered COORDINATOR_NOT_AVAILABLE)."""
    return error_records(broker.lines)


def bootstrap_of(brokers: dict[int, BrokerProcess], *ids: int) -> str:
    return ",".join(brokers[i].bootstrap for i in ids or brokers)


def leaders(admin: AdminClient, topic: str) -> dict[int, int] | None:
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return None
    return {index: p.leader for index, p in found.partitions.items()}


def full_isr(admin: AdminClient, topic: str) -> bool:
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    return bool(
        found is not None
        and found.error is None
        and found.partitions
        and all(len(p.isrs) == 3 for p in found.partitions.values())
    )


def spread_topic(brokers: dict[int, BrokerProcess]) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap_of(brokers)})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic(TOPIC, 3, replica_assignment=ASSIGNMENT)])[TOPIC].result(30)
    poll(lambda: full_isr(admin, TOPIC), "a full ISR")
    assert leaders(admin, TOPIC) == {0: 1, 1: 2, 2: 3}
    return admin


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(CLIENT_TIMEOUT)
    return producer


def test_transaction_across_partitions_led_by_three_brokers(
    brokers: dict[int, BrokerProcess],
) -> None:
    admin = spread_topic(brokers)
    bootstrap = bootstrap_of(brokers)
    producer = txn_producer(bootstrap, "spread")
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"c%d" % i, partition=i % 3)
    producer.commit_transaction(CLIENT_TIMEOUT)
    producer.begin_transaction()
    for i in range(12):
        producer.produce(TOPIC, b"x%d" % i, partition=i % 3)
    producer.flush(CLIENT_TIMEOUT)  # on the brokers before the abort
    producer.abort_transaction(CLIENT_TIMEOUT)
    producer.begin_transaction()
    producer.produce(TOPIC, b"last", partition=2)
    producer.commit_transaction(CLIENT_TIMEOUT)

    partitions = [(TOPIC, p) for p in range(3)]
    committed = sorted([(TOPIC, i % 3, b"c%d" % i) for i in range(30)] + [(TOPIC, 2, b"last")])
    aborted = sorted((TOPIC, i % 3, b"x%d" % i) for i in range(12))
    # The markers of the last commit are written after EndTxn is answered: the read_committed
    # ends (last stable offsets) reach every partition's high watermark once they are in.
    ends = {0: 10 + 1 + 4 + 1, 1: 10 + 1 + 4 + 1, 2: 10 + 1 + 4 + 1 + 1 + 1}
    poll(
        lambda: all(watermarks(bootstrap, TOPIC, p)[1] == end for p, end in ends.items()),
        "every marker written",
    )
    assert read_to_end(bootstrap, partitions, "read_committed") == committed
    assert read_to_end(bootstrap, partitions, "read_uncommitted") == sorted(committed + aborted)
    assert_stray_batch_refused(brokers, admin)
    assert_java_client_transactions(bootstrap, partitions)
    assert [errors_logged(b) for b in brokers.values()] == [[], [], []]


def assert_java_client_transactions(bootstrap: str, partitions: list[tuple[str, int]]) -> None:
    """Apache Kafka's Java producer (java/JavaTxnProducer.java): a committed and an aborted
    transaction over the three partitions; read_committed sees exactly the committed."""
    from compat.kafka_dist import kafka_lib

    before = read_to_end(bootstrap, partitions, "read_committed")
    done = subprocess.run(
        ["java", "-cp", f"{kafka_lib()}/*", str(JAVA_PRODUCER), bootstrap, TOPIC, "java", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr[-2000:]
    committed = [(TOPIC, i % 3, b"java-c%d" % i) for i in range(6)]
    assert read_to_end(bootstrap, partitions, "read_committed") == sorted(before + committed)


def assert_stray_batch_refused(brokers: dict[int, BrokerProcess], admin: AdminClient) -> None:
    """KIP-890 verification across brokers: a transactional batch for a partition that is
    not in the producer's transaction is refused by its leader (INVALID_TXN_STATE, after
    asking the coordinator, another broker) and nothing is appended."""
    transactional_id = next(
        f"stray-{n}" for n in range(100) if coordinator_of(admin, f"stray-{n}") == 1
    )
    host, port = brokers[1].bootstrap.split(":")
    with RawClient(host, int(port)) as coordinator:
        init = dataclasses.replace(init_producer_id_request(), transactional_id=transactional_id)
        answer = coordinator.request(init)
        assert answer.error_code == ErrorCode.none
    batch = encode_batch(
        [(None, b"stray")],
        timestamp=1_700_000_000_000,
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
        base_sequence=0,
        attributes=TRANSACTIONAL_FLAG,
    )
    before = watermarks(brokers[2].bootstrap, TOPIC, 1)
    host, port = brokers[2].bootstrap.split(":")  # partition 1's leader
    with RawClient(host, int(port)) as leader:
        response = leader.request(
            produce_request(TOPIC, 1, batch, transactional_id=transactional_id)
        )
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == ErrorCode.invalid_txn_state
    assert watermarks(brokers[2].bootstrap, TOPIC, 1) == before


def coordinator_of(admin: AdminClient, transactional_id: str) -> int:
    found = admin.list_topics(TXN_STATE_TOPIC, timeout=10).topics[TXN_STATE_TOPIC]
    return found.partitions[txn_partition(transactional_id, TXN_STATE_PARTITIONS)].leader


def test_marker_reaches_the_new_leader_when_the_leader_is_killed(
    brokers: dict[int, BrokerProcess],
) -> None:
    admin = spread_topic(brokers)
    # Ids until one is coordinated by broker 2: partition 0's leader (broker 1) dies, and
    # partition 1 (led by the coordinator) and 2 (broker 3) stay where they are.
    warmup = txn_producer(bootstrap_of(brokers), "warmup")  # creates __transaction_state
    poll(lambda: full_isr(admin, TXN_STATE_TOPIC), "a full ISR on the transaction log")
    transactional_id = next(
        f"failover-{n}" for n in range(100) if coordinator_of(admin, f"failover-{n}") == 2
    )
    producer = txn_producer(bootstrap_of(brokers), transactional_id)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"v%d" % i, partition=i % 3)
    producer.flush(CLIENT_TIMEOUT)  # acks=all: on every in-sync replica
    brokers[1].kill()
    producer.commit_transaction(CLIENT_TIMEOUT)  # answered once PrepareCommit is written

    survivors = bootstrap_of(brokers, 2, 3)
    admin = AdminClient({"bootstrap.servers": survivors})
    poll(lambda: (led := leaders(admin, TOPIC)) and led[0] in (2, 3), "a new leader")

    # 10 records and the commit marker in each partition, the first one from the new leader.
    def marked() -> bool:
        try:
            return all(watermarks(survivors, TOPIC, p)[1] == 11 for p in range(3))
        except KafkaException:  # OFFSET_NOT_AVAILABLE until the new leader's HW catches up
            return False

    poll(marked, "the marker on the new leader")
    partitions = [(TOPIC, p) for p in range(3)]
    expected = sorted((TOPIC, i % 3, b"v%d" % i) for i in range(30))
    assert read_to_end(survivors, partitions, "read_committed") == expected
    # The coordinator completed the transaction: the producer runs the next one at once.
    producer.begin_transaction()
    producer.produce(TOPIC, b"next", partition=1)
    producer.commit_transaction(CLIENT_TIMEOUT)
    assert read_to_end(survivors, [(TOPIC, 1)], "read_committed") == sorted(
        [(TOPIC, 1, b"v%d" % i) for i in range(1, 30, 3)] + [(TOPIC, 1, b"next")]
    )
    assert [errors_logged(brokers[b]) for b in (2, 3)] == [[], []]
    del warmup


def group_coordinator_of(admin: AdminClient, group_id: str) -> int:
    found = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
    return found.partitions[group_partition(group_id, OFFSETS_PARTITIONS)].leader


def test_offsets_sent_to_a_transaction_coordinated_by_another_broker(
    brokers: dict[int, BrokerProcess],
) -> None:
    admin = spread_topic(brokers)
    bootstrap = bootstrap_of(brokers)
    warmup = txn_producer(bootstrap, "warmup")  # creates __transaction_state
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    group.committed([TopicPartition(TOPIC, 0)], CLIENT_TIMEOUT)  # creates __consumer_offsets
    group.close()
    poll(lambda: full_isr(admin, TXN_STATE_TOPIC), "a full ISR on the transaction log")
    poll(lambda: full_isr(admin, OFFSETS_TOPIC), "a full ISR on the offsets topic")
    transactional_id = next(
        f"sender-{n}" for n in range(100) if coordinator_of(admin, f"sender-{n}") == 1
    )
    group_id = next(f"g-{n}" for n in range(100) if group_coordinator_of(admin, f"g-{n}") == 2)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    producer = txn_producer(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(TOPIC, b"out", partition=2)
    offsets = [TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 3)]
    producer.send_offsets_to_transaction(
        offsets, consumer.consumer_group_metadata(), CLIENT_TIMEOUT
    )
    producer.commit_transaction(CLIENT_TIMEOUT)

    committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(2)], CLIENT_TIMEOUT)
    assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [
        (0, 7, None),
        (1, 3, None),
    ]
    consumer.close()
    assert read_to_end(bootstrap, [(TOPIC, 2)], "read_committed") == [(TOPIC, 2, b"out")]
    assert [errors_logged(b) for b in brokers.values()] == [[], [], []]
    del warmup
