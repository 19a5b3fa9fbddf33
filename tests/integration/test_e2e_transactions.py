"""Transactions end to end with confluent-kafka's transactional producer against a real
kafkalite process: commit and abort across partitions and topics (read_committed sees
exactly the committed records, read_uncommitted all of them), a zombie producer fenced,
and offsets sent to the transaction visible only on commit."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import (
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from e2e_helpers import CLIENT_TIMEOUT, consumer, create_topic, read_to_end, wait_until

from kafkalite.testing import BrokerProcess

WORKER = Path(__file__).with_name("txn_worker.py")


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(CLIENT_TIMEOUT)
    return producer


def test_commit_and_abort_across_partitions_and_topics(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap = module_broker.bootstrap
    a, b = topic_name("a"), topic_name("b")
    create_topic(bootstrap, a, 2)
    create_topic(bootstrap, b, 1)
    producer = txn_producer(bootstrap, topic_name("txn"))
    producer.begin_transaction()
    for i in range(6):
        producer.produce(a, b"c%d" % i, partition=i % 2)
        producer.produce(b, b"c%d" % i)
    producer.commit_transaction(CLIENT_TIMEOUT)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(a, b"x%d" % i, partition=i % 2)
        producer.produce(b, b"x%d" % i)
    producer.flush(CLIENT_TIMEOUT)  # on the broker before the abort
    producer.abort_transaction(CLIENT_TIMEOUT)
    producer.begin_transaction()
    producer.produce(b, b"last")
    producer.commit_transaction(CLIENT_TIMEOUT)

    partitions = [(a, 0), (a, 1), (b, 0)]
    committed = sorted(
        [(a, i % 2, b"c%d" % i) for i in range(6)]
        + [(b, 0, b"c%d" % i) for i in range(6)]
        + [(b, 0, b"last")]
    )
    aborted = sorted(
        [(a, i % 2, b"x%d" % i) for i in range(4)] + [(b, 0, b"x%d" % i) for i in range(4)]
    )
    assert read_to_end(bootstrap, partitions, "read_committed") == committed
    assert read_to_end(bootstrap, partitions, "read_uncommitted") == sorted(committed + aborted)


def test_open_transaction_holds_back_read_committed(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap = module_broker.bootstrap
    topic = topic_name()
    create_topic(bootstrap, topic, 1)
    producer = txn_producer(bootstrap, topic_name("txn"))
    producer.begin_transaction()
    producer.produce(topic, b"open")
    producer.flush(CLIENT_TIMEOUT)
    cons = consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        tp = TopicPartition(topic, 0)
        # ListOffsets with read_committed answers the last stable offset: 0 while open.
        assert cons.get_watermark_offsets(tp, CLIENT_TIMEOUT, False) == (0, 0)
        producer.commit_transaction(CLIENT_TIMEOUT)
        assert cons.get_watermark_offsets(tp, CLIENT_TIMEOUT, False) == (0, 2)  # record + marker
    finally:
        cons.close()


def test_zombie_producer_is_fenced(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap = module_broker.bootstrap
    topic, transactional_id = topic_name(), topic_name("txn")
    create_topic(bootstrap, topic, 1)
    zombie = txn_producer(bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(CLIENT_TIMEOUT)
    successor = txn_producer(bootstrap, transactional_id)  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic, b"successor")
    successor.commit_transaction(CLIENT_TIMEOUT)
    zombie.produce(topic, b"late")
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(CLIENT_TIMEOUT)
    assert raised.value.args[0].code() == KafkaError._FENCED
    assert read_to_end(bootstrap, [(topic, 0)], "read_committed") == [(topic, 0, b"successor")]


def test_offsets_sent_to_the_transaction_are_visible_only_on_commit(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap = module_broker.bootstrap
    source, sink, group = topic_name("in"), topic_name("out"), topic_name("group")
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    # read_uncommitted: its OffsetFetch does not require stable offsets, so it sees a pending
    # commit as none (read_committed consumers are answered UNSTABLE_OFFSET_COMMIT and wait).
    cons = consumer(bootstrap, **{"group.id": group, "isolation.level": "read_uncommitted"})
    producer = txn_producer(bootstrap, topic_name("txn"))
    try:
        cons.assign([TopicPartition(source, 0, 0)])
        metadata = cons.consumer_group_metadata()

        def committed() -> int:
            [tp] = cons.committed([TopicPartition(source, 0)], CLIENT_TIMEOUT)
            return tp.offset

        producer.begin_transaction()
        producer.produce(sink, b"v")
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 5)], metadata, CLIENT_TIMEOUT
        )
        producer.abort_transaction(CLIENT_TIMEOUT)
        assert committed() < 0  # nothing committed
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 7)], metadata, CLIENT_TIMEOUT
        )
        assert committed() < 0  # still pending
        producer.commit_transaction(CLIENT_TIMEOUT)
        # EndTxn is answered once PrepareCommit is durable; the markers, which make the offsets
        # visible, follow it, as in Kafka (its TransactionCoordinator answers before sending
        # them), so the commit shows up without a further request of the producer's.
        wait_until(lambda: committed() == 7, CLIENT_TIMEOUT, 0.05, "the committed offset")
    finally:
        cons.close()


KILL_SEEDS = [7, 11]


@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_consume_transform_produce_killed_and_restarted_is_exactly_once(
    module_broker: BrokerProcess, topic_name: Callable[..., str], seed: int
) -> None:
    """SIGKILL the worker at seeded points of its progress (once a seeded number of further
    records reached the sink, committed or not), restart it with the same transactional id, and let
    the last run finish: the sink holds each input exactly once, and the committed input
    offsets are the input's ends."""
    bootstrap = module_broker.bootstrap
    source, sink = topic_name("in"), topic_name("out")
    group, tid = topic_name("group"), topic_name("txn")
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 1)
    inputs = [b"record-%04d" % i for i in range(240)]
    plain = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(inputs):
        plain.produce(source, value, key=value, partition=i % 2)
    assert plain.flush(CLIENT_TIMEOUT) == 0
    # How many more records (committed or not) reach the sink before each kill.
    advances = random.Random(seed).sample(range(5, 60), 3)
    argv = [sys.executable, str(WORKER), bootstrap, source, "2", sink, group, tid]

    def sink_end() -> int:
        return probe.get_watermark_offsets(TopicPartition(sink, 0), CLIENT_TIMEOUT, False)[1]

    probe = consumer(bootstrap)
    try:
        for advance in advances:
            target = sink_end() + advance
            worker = subprocess.Popen(argv)
            try:
                wait_until(
                    lambda: sink_end() >= target,  # noqa: B023 (called within the iteration)
                    timeout=60,
                    interval=0.01,
                    message=f"{target} records in the sink",
                )
            finally:
                worker.kill()  # SIGKILL
                worker.wait()
        final = subprocess.run(argv, timeout=120)
        assert final.returncode == 0
    finally:
        probe.close()
    group_probe = consumer(bootstrap, **{"group.id": group})
    try:
        offsets = group_probe.committed(
            [TopicPartition(source, 0), TopicPartition(source, 1)], CLIENT_TIMEOUT
        )
    finally:
        group_probe.close()
    assert [tp.offset for tp in offsets] == [120, 120]
    output = read_to_end(bootstrap, [(sink, 0)], "read_committed")
    assert sorted(value for _, _, value in output) == sorted(v.upper() for v in inputs)
