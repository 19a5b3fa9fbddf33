"""Admin APIs kafka-python's admin suite runs on a cluster (issue 13 point 6; real processes:
a real ZooKeeper, three `kafkalite serve` brokers): DeleteTopics sent to the broker that has
just answered CreateTopics finds the topic (CreateTopics answers once the partitions have
leaders in that broker's own metadata, as Kafka's DelayedCreatePartitions), on every broker;
DeleteGroups deletes an empty group, refuses a live one and answers an unknown one, from any
broker."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, build

pytest.importorskip("kafkalite.cluster.member")  # `kafkalite serve` joining a cluster
pytestmark = pytest.mark.slow
TIMEOUT = datetime.timedelta(seconds=30)


def create_then_delete(broker: BrokerProcess, name: str) -> tuple[ErrorCode, ErrorCode]:
    topic = build(
        19,
        7,
        "CreatableTopic",
        name=name,
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    create = build(
        19, 7, "CreateTopicsRequest", topics=(topic,), timeout=TIMEOUT, validate_only=False
    )
    delete = build(20, 4, "DeleteTopicsRequest", topic_names=(name,), timeout=TIMEOUT)
    with RawClient(broker.host, broker.port) as client:
        (created,) = client.request(create).topics
        (deleted,) = client.request(delete).responses
    return created.error_code, deleted.error_code


def test_delete_topics_right_after_create_topics_on_every_broker(
    start_brokers: StartBrokers,
) -> None:
    brokers = start_brokers({})
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    answers = {i: create_then_delete(b, f"short-lived-{i}") for i, b in brokers.items()}
    assert answers == {i: (ErrorCode.none, ErrorCode.none) for i in brokers}


def consume_one(bootstrap: str, group: str) -> Consumer:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["events"])
    message: Any = poll(lambda: consumer.poll(1.0), f"a message for {group}")
    assert message.error() is None
    consumer.commit(asynchronous=False)
    return consumer


def test_delete_groups_on_a_cluster(start_brokers: StartBrokers) -> None:
    brokers = start_brokers({"offsets.topic.num.partitions": "3"})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("events", b"one")
    assert producer.flush(60) == 0
    consume_one(bootstrap, "left").close()
    live = consume_one(bootstrap, "live")
    try:
        futures = admin.delete_consumer_groups(["left", "live", "never"], request_timeout=30)
        codes = {}
        for group, future in futures.items():
            exc = future.exception(30)
            codes[group] = None if exc is None else exc.args[0].code()
        assert codes == {
            "left": None,
            "live": KafkaError.NON_EMPTY_GROUP,
            "never": KafkaError.GROUP_ID_NOT_FOUND,
        }
        listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
        assert {"left", "live"} & listed == {"live"}
    finally:
        live.close()
