"""Broker state on the wire: producer state and topic ids across restarts and crashes,
producer epochs, and min.insync.replicas."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable

import pytest

from kafkalite.testing import BrokerProcess
from protocol_tests.batches import decode_records, idempotent_batch, simple_batch
from protocol_tests.raw_client import (
    RawClient,
    build,
    create_topics_request,
    fetch_request,
    init_producer_id_request,
    log_end,
    metadata_request,
    produce,
    unique_name,
)

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_TOPIC_ID = 100


def _topic_id(client: RawClient, topic: str) -> uuid.UUID:
    (meta,) = client.request(metadata_request([topic], auto_create=False)).topics
    assert meta.error_code == NONE
    return meta.topic_id


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_duplicate_detected_after_restart(
    broker_factory: Callable[..., BrokerProcess], connect: Callable[..., RawClient], how: str
) -> None:
    """Producer state is persisted (snapshot) or rebuilt from the log after a crash: a
    retried batch is still recognised as a duplicate after the broker comes back."""
    broker = broker_factory()
    client = connect(broker)
    topic = unique_name("pstate")
    assert client.request(create_topics_request(topic)).topics[0].error_code == NONE
    pid = client.request(init_producer_id_request()).producer_id
    batches = [idempotent_batch(pid, 0, 3 * i, 3, b"b%d" % i) for i in range(3)]
    for i, batch in enumerate(batches):
        assert produce(client, topic, batch) == (NONE, 3 * i)

    if how == "sigterm":
        broker.restart()
    else:
        broker.kill()
        broker.start()
    client = connect(broker)
    assert log_end(client, topic) == 9
    assert produce(client, topic, batches[-1]) == (NONE, 6), "duplicate appended again"
    assert produce(client, topic, batches[0]) == (NONE, 0), "older duplicate appended"
    assert log_end(client, topic) == 9
    error, _ = produce(client, topic, idempotent_batch(pid, 0, 20, 1, b"gap"))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic, idempotent_batch(pid, 0, 9, 1, b"next")) == (NONE, 9)


def test_producer_epoch_rules(client: RawClient, new_topic: Callable) -> None:
    """Kafka's ProducerAppendInfo: a lower epoch is fenced (INVALID_PRODUCER_EPOCH); a
    higher epoch must start again at sequence 0."""
    topic, _ = new_topic()
    pid = client.request(init_producer_id_request()).producer_id
    assert produce(client, topic, idempotent_batch(pid, 1, 0, 2, b"e1")) == (NONE, 0)
    error, _ = produce(client, topic, idempotent_batch(pid, 0, 2, 1, b"old"))
    assert error == INVALID_PRODUCER_EPOCH
    error, _ = produce(client, topic, idempotent_batch(pid, 2, 5, 1, b"new-epoch-late-seq"))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic, idempotent_batch(pid, 2, 0, 1, b"e2")) == (NONE, 2)
    assert log_end(client, topic) == 3


def test_topic_id_stable_across_restart_and_new_after_recreate(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    topic = unique_name("ids")
    with RawClient(broker.host, broker.port) as client:
        created = client.request(create_topics_request(topic)).topics[0]
        assert created.error_code == NONE
        first_id = _topic_id(client, topic)
        assert created.topic_id == first_id
        assert produce(client, topic, simple_batch(2)) == (NONE, 0)
    broker.restart()
    with RawClient(broker.host, broker.port) as client:
        assert _topic_id(client, topic) == first_id
        part = client.request(fetch_request(None, 0, 0, version=13, topic_id=first_id))
        assert len(decode_records(part.responses[0].partitions[0].records)) == 2

        request = build(
            20,
            6,
            "DeleteTopicsRequest",
            topics=(build(20, 6, "DeleteTopicState", name=topic, topic_id=None),),
            timeout=datetime.timedelta(seconds=10),
        )
        (deleted,) = client.request(request).responses
        assert (deleted.error_code, deleted.topic_id) == (NONE, first_id)
        assert client.request(create_topics_request(topic)).topics[0].error_code == NONE
        second_id = _topic_id(client, topic)
        assert second_id != first_id
        old = client.request(fetch_request(None, 0, 0, version=13, topic_id=first_id))
        assert old.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID
        new = client.request(fetch_request(None, 0, 0, version=13, topic_id=second_id))
        part = new.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark) == (NONE, 0)
        assert not part.records


def test_min_insync_replicas_is_capped_at_the_replication_factor(client: RawClient) -> None:
    """min.insync.replicas=2 on a one-replica topic: acks=all is accepted, as Kafka 4.4 does
    (Partition.effectiveMinIsr caps it at the replication factor; checked against Kafka)."""
    topic = unique_name("min-isr")
    created = client.request(create_topics_request(topic, configs={"min.insync.replicas": "2"}))
    assert created.topics[0].error_code == NONE
    assert produce(client, topic, simple_batch(1), acks=-1) == (NONE, 0)
    assert produce(client, topic, simple_batch(1), acks=1) == (NONE, 1)
    assert log_end(client, topic) == 2
