"""Idempotent produce on the wire: InitProducerId, duplicate batches, sequence checks."""

from __future__ import annotations

from collections.abc import Callable

from protocol_tests.batches import decode_batches, idempotent_batch, simple_batch
from protocol_tests.raw_client import (
    RawClient,
    fetch_request,
    init_producer_id_request,
    log_end,
    produce,
)

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45

NewTopic = Callable[..., tuple[str, object]]


def _init_producer_id(client: RawClient) -> tuple[int, int]:
    response = client.request(init_producer_id_request())
    assert response.error_code == NONE
    assert response.producer_id >= 0
    assert response.producer_epoch == 0
    return response.producer_id, response.producer_epoch


def test_init_producer_id_hands_out_fresh_ids(client: RawClient) -> None:
    ids = {_init_producer_id(client)[0] for _ in range(3)}
    assert len(ids) == 3


def test_duplicate_batch_is_deduplicated(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    pid, epoch = _init_producer_id(client)
    batch = idempotent_batch(pid, epoch, 0, 3, b"dup")
    assert produce(client, topic, batch) == (NONE, 0)
    assert log_end(client, topic) == 3
    # The same batch again (a retry): same base offset, nothing appended.
    assert produce(client, topic, batch) == (NONE, 0)
    assert log_end(client, topic) == 3
    # The next sequence is appended normally.
    assert produce(client, topic, idempotent_batch(pid, epoch, 3, 2, b"next")) == (NONE, 3)
    assert log_end(client, topic) == 5
    part = client.request(fetch_request(topic, 0, 0)).responses[0].partitions[0]
    batches = decode_batches(part.records)
    assert [(b.base_offset, b.base_sequence, b.producer_id) for b in batches] == [
        (0, 0, pid),
        (3, 3, pid),
    ]


def test_duplicate_of_an_older_batch_is_deduplicated(
    client: RawClient, new_topic: NewTopic
) -> None:
    """Kafka remembers the last five batches per producer, not only the last one."""
    topic, _ = new_topic()
    pid, epoch = _init_producer_id(client)
    first = idempotent_batch(pid, epoch, 0, 2, b"a")
    assert produce(client, topic, first) == (NONE, 0)
    assert produce(client, topic, idempotent_batch(pid, epoch, 2, 2, b"b")) == (NONE, 2)
    assert produce(client, topic, idempotent_batch(pid, epoch, 4, 2, b"c")) == (NONE, 4)
    assert produce(client, topic, first) == (NONE, 0)
    assert log_end(client, topic) == 6


def test_out_of_order_sequence(client: RawClient, new_topic: NewTopic) -> None:
    topic, _ = new_topic()
    pid, epoch = _init_producer_id(client)
    assert produce(client, topic, idempotent_batch(pid, epoch, 0, 3, b"a")) == (NONE, 0)
    error, _ = produce(client, topic, idempotent_batch(pid, epoch, 10, 1, b"gap"))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(client, topic) == 3
    # The expected sequence still works afterwards.
    assert produce(client, topic, idempotent_batch(pid, epoch, 3, 1, b"b")) == (NONE, 3)


def test_producer_without_state_is_accepted_at_any_sequence(
    client: RawClient, new_topic: NewTopic
) -> None:
    """Kafka's ProducerAppendInfo.checkSequence: with no state for the producer on the
    partition (epoch NO_PRODUCER_EPOCH), "accept writes with any sequence number"; the
    next batch must then follow on."""
    topic, _ = new_topic()
    pid, epoch = _init_producer_id(client)
    assert produce(client, topic, idempotent_batch(pid, epoch, 5, 1, b"late")) == (NONE, 0)
    assert produce(client, topic, idempotent_batch(pid, epoch, 6, 1, b"next")) == (NONE, 1)
    error, _ = produce(client, topic, idempotent_batch(pid, epoch, 9, 1, b"gap"))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(client, topic) == 2


def test_non_idempotent_batches_are_never_deduplicated(
    client: RawClient, new_topic: NewTopic
) -> None:
    topic, _ = new_topic()
    batch = simple_batch(2, b"plain")
    assert produce(client, topic, batch) == (NONE, 0)
    assert produce(client, topic, batch) == (NONE, 2)
    assert log_end(client, topic) == 4


def test_sequence_wraps_around_int32_max(client: RawClient, new_topic: NewTopic) -> None:
    """Sequences wrap from 2**31-1 to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    topic, _ = new_topic()
    pid, epoch = _init_producer_id(client)
    first = idempotent_batch(pid, epoch, 2**31 - 2, 3, b"wrap")  # sequences 2**31-2, 2**31-1, 0
    assert produce(client, topic, first) == (NONE, 0)
    assert produce(client, topic, first) == (NONE, 0)  # still a duplicate
    assert produce(client, topic, idempotent_batch(pid, epoch, 1, 2, b"after")) == (NONE, 3)
    assert log_end(client, topic) == 5
