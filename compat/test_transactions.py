"""Transactions, the same on kafkalite and Apache Kafka (confluent-kafka's transactional
producer): commit and abort across partitions and topics, with the offsets the markers take;
read_committed consumers see exactly the committed records and read_uncommitted all of them;
ListOffsets with read_committed stops at an open transaction; a zombie producer is fenced;
offsets sent to a transaction are visible only once it commits; Kafka's kafka-transactions
tool lists and describes transactions and producers."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Producer, TopicPartition

from compat.kafka_tools import ToolRun, run_tool
from compat.scenario_helpers import (
    CLIENT_TIMEOUT,
    consumer,
    create_topic,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    wait_until,
)
from compat.targets import Target


def _name(hint: str) -> str:
    return f"{hint}-{uuid.uuid4().hex[:10]}"


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(CLIENT_TIMEOUT)
    return producer


def read_to_end(
    bootstrap: str, partitions: list[tuple[str, int]], isolation: str
) -> list[tuple[str, int, int, bytes]]:
    """(topic, partition, offset, value) of every record a consumer with `isolation` reads up
    to each partition's end (markers take offsets too, so the end is the consumer position)."""
    cons = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        ends = {
            (t, p): cons.get_watermark_offsets(TopicPartition(t, p), CLIENT_TIMEOUT, False)[1]
            for t, p in partitions
        }
        cons.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        got: list[tuple[str, int, int, bytes]] = []

        def at_end() -> bool:
            message = cons.poll(0.1)
            if message is not None and not message.error():
                got.append(
                    (message.topic(), message.partition(), message.offset(), message.value())
                )
            positions = cons.position([TopicPartition(t, p) for t, p in partitions])
            return all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in positions)

        wait_until(at_end, timeout=30, interval=0, message="the consumer to reach the ends")
        return sorted(got)
    finally:
        cons.close()


def test_commit_and_abort_across_partitions_and_topics(target: Target) -> None:
    bootstrap = target.bootstrap
    a, b = _name("txn-a"), _name("txn-b")
    create_topic(bootstrap, a, 2)
    create_topic(bootstrap, b, 1)
    producer = txn_producer(bootstrap, _name("txn"))
    producer.begin_transaction()
    for i in range(4):
        producer.produce(a, b"c%d" % i, partition=i % 2)
        producer.produce(b, b"c%d" % i)
    producer.commit_transaction(CLIENT_TIMEOUT)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(a, b"x%d" % i, partition=i % 2)
        producer.produce(b, b"x%d" % i)
    producer.flush(CLIENT_TIMEOUT)
    producer.abort_transaction(CLIENT_TIMEOUT)
    producer.begin_transaction()
    producer.produce(b, b"last")
    producer.commit_transaction(CLIENT_TIMEOUT)

    partitions = [(a, 0), (a, 1), (b, 0)]
    # Each transaction's marker takes one offset in each of its partitions.
    committed = [
        (a, 0, 0, b"c0"),
        (a, 0, 1, b"c2"),
        (a, 1, 0, b"c1"),
        (a, 1, 1, b"c3"),
        (b, 0, 0, b"c0"),
        (b, 0, 1, b"c1"),
        (b, 0, 2, b"c2"),
        (b, 0, 3, b"c3"),
        (b, 0, 8, b"last"),
    ]
    aborted = [(a, 0, 3, b"x0"), (a, 1, 3, b"x1"), (b, 0, 5, b"x0"), (b, 0, 6, b"x1")]
    assert read_to_end(bootstrap, partitions, "read_committed") == sorted(committed)
    assert read_to_end(bootstrap, partitions, "read_uncommitted") == sorted(committed + aborted)


def test_read_committed_list_offsets_stop_at_an_open_transaction(target: Target) -> None:
    bootstrap = target.bootstrap
    topic = _name("txn-open")
    create_topic(bootstrap, topic, 1)
    producer = txn_producer(bootstrap, _name("txn"))
    producer.begin_transaction()
    producer.produce(topic, b"open")
    producer.flush(CLIENT_TIMEOUT)
    committed_view = consumer(bootstrap, **{"isolation.level": "read_committed"})
    uncommitted_view = consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
    try:
        tp = TopicPartition(topic, 0)
        assert committed_view.get_watermark_offsets(tp, CLIENT_TIMEOUT, False) == (0, 0)
        assert uncommitted_view.get_watermark_offsets(tp, CLIENT_TIMEOUT, False) == (0, 1)
        producer.commit_transaction(CLIENT_TIMEOUT)
        # Kafka answers EndTxn once the commit is prepared and writes the markers after it, so
        # the last stable offset moves to 2 (record + marker) shortly after, not at once.
        wait_until(
            lambda: committed_view.get_watermark_offsets(tp, CLIENT_TIMEOUT, False) == (0, 2),
            timeout=CLIENT_TIMEOUT,
            message="the last stable offset past the commit marker",
        )
    finally:
        committed_view.close()
        uncommitted_view.close()


def test_a_zombie_producer_is_fenced(target: Target) -> None:
    bootstrap = target.bootstrap
    topic, transactional_id = _name("txn-zombie"), _name("txn")
    create_topic(bootstrap, topic, 1)
    zombie = txn_producer(bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(CLIENT_TIMEOUT)
    successor = txn_producer(bootstrap, transactional_id)
    successor.begin_transaction()
    successor.produce(topic, b"successor")
    successor.commit_transaction(CLIENT_TIMEOUT)
    zombie.produce(topic, b"late")
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(CLIENT_TIMEOUT)
    assert raised.value.args[0].code() == KafkaError._FENCED
    # The zombie's record (0) was aborted by the successor's init (marker at 1).
    assert read_to_end(bootstrap, [(topic, 0)], "read_committed") == [(topic, 0, 2, b"successor")]


def test_offsets_sent_to_a_transaction_are_visible_only_on_commit(target: Target) -> None:
    bootstrap = target.bootstrap
    source, group = _name("txn-src"), _name("txn-group")
    create_topic(bootstrap, source, 1)
    cons = consumer(bootstrap, **{"group.id": group})
    producer = txn_producer(bootstrap, _name("txn"))
    try:
        metadata = cons.consumer_group_metadata()

        def committed() -> int:
            [tp] = cons.committed([TopicPartition(source, 0)], CLIENT_TIMEOUT)
            return tp.offset

        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 5)], metadata)
        producer.abort_transaction(CLIENT_TIMEOUT)
        assert committed() < 0
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], metadata)
        producer.commit_transaction(CLIENT_TIMEOUT)
        assert committed() == 7
    finally:
        cons.close()


def _table(run: ToolRun) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated table as one dict per row."""
    header, *rows = [line for line in run.stdout.splitlines() if line.strip()]
    names = [name.strip() for name in header.split("\t")]
    return [dict(zip(names, (v.strip() for v in row.split("\t")), strict=False)) for row in rows]


def test_kafka_transactions_tool_lists_and_describes(target: Target) -> None:
    bootstrap = target.bootstrap
    topic, transactional_id = _name("txn-tool"), _name("txn")
    create_topic(bootstrap, topic, 1)
    producer = txn_producer(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, b"open")
    producer.flush(CLIENT_TIMEOUT)

    listed = run_tool("kafka-transactions", bootstrap, "list")
    assert listed.exit_code == 0
    ours = [row for row in _table(listed) if row["TransactionalId"] == transactional_id]
    assert [row["TransactionState"] for row in ours] == ["Ongoing"]

    described = run_tool(
        "kafka-transactions", bootstrap, "describe", "--transactional-id", transactional_id
    )
    [row] = _table(described)
    assert (row["TransactionState"], row["TransactionTimeoutMs"], row["TopicPartitions"]) == (
        "Ongoing",
        "60000",
        f"{topic}-0",
    )
    assert row["ProducerId"] == ours[0]["ProducerId"]

    producers = run_tool(
        "kafka-transactions", bootstrap, "describe-producers", "--topic", topic, "--partition", "0"
    )
    [state] = _table(producers)
    assert (state["ProducerId"], state["LastSequence"], state["CurrentTransactionStartOffset"]) == (
        row["ProducerId"],
        "0",
        "0",
    )

    unknown = run_tool("kafka-transactions", bootstrap, "describe", "--transactional-id", "nope")
    assert unknown.exit_code == 1
    assert "failed because the ID could not be found" in unknown.stderr
    producer.abort_transaction(CLIENT_TIMEOUT)
