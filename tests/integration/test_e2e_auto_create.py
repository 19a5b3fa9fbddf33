"""Metadata auto-creation of topics, on (default) and off (auto.create.topics.enable=false)."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError
from e2e_helpers import (
    CLIENT_TIMEOUT,
    Deliveries,
    admin,
    consume_all,
    create_topic,
    produce_all,
    producer,
)

from kafkalite.testing import BrokerProcess


def test_auto_create_on_uses_num_partitions(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    broker = broker_factory({"num.partitions": "3"})
    topic = topic_name()
    produce_all(producer(broker.bootstrap), topic, ({"value": b"v%d" % i} for i in range(30)))
    metadata = admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]
    consumed = consume_all(broker.bootstrap, topic, range(3))
    assert sorted(c.value for p in consumed for c in consumed[p]) == sorted(
        b"v%d" % i for i in range(30)
    )


def test_auto_create_off_produce_fails_unknown_topic(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    topic = topic_name()
    deliveries = Deliveries()
    prod = producer(
        broker.bootstrap,
        **{"topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 10_000},
    )
    prod.produce(topic, value=b"nowhere", on_delivery=deliveries.callback)
    assert prod.flush(CLIENT_TIMEOUT) == 0
    (report,) = deliveries.reports
    assert report.error is not None
    assert report.error.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)
    metadata = admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT)
    assert topic not in metadata.topics
    assert not (broker.data_dir / f"{topic}-0").exists()

    # Explicitly created topics work as usual on that broker.
    created = topic_name("created")
    create_topic(broker.bootstrap, created, 1)
    produce_all(producer(broker.bootstrap), created, [{"value": b"ok"}])
    assert [c.value for c in consume_all(broker.bootstrap, created, [0])[0]] == [b"ok"]


def test_auto_create_off_consumer_sees_unknown_topic(
    broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]
) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    topic = topic_name()
    metadata = admin(broker.bootstrap).list_topics(topic, timeout=CLIENT_TIMEOUT)
    assert metadata.topics[topic].error is not None
    assert metadata.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics
