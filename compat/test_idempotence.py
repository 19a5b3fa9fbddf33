"""The idempotent producer, the same on kafkalite and Apache Kafka: librdkafka with
enable.idempotence and five batches in flight writes every message once and in order, with its
producer id and contiguous sequences in the stored batches; a restarted producer gets a new
producer id; and (on the wire, the retries a healthy network never causes) duplicated batches
are answered with their original offsets and not written again, gaps are refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer

from compat.scenario_helpers import (
    CLIENT_TIMEOUT,
    consume_all,
    create_topic,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    stored_batches,
    wait_until,
    watermarks,
)
from protocol_tests.batches import DecodedBatch, simple_batch
from protocol_tests.raw_client import (
    RawClient,
    init_producer_id_request,
    produce_request,
    response_class,
)

IDEMPOTENT = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 1,
    "batch.num.messages": 50,
    "max.in.flight.requests.per.connection": 5,
}


def _error_name(code: int) -> str | None:
    return None if code == 0 else KafkaError(code).name()


class _Stats:
    """librdkafka statistics (delivered by poll()): the producer id it was given."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] = {}

    def callback(self, raw: str) -> None:
        self.latest = json.loads(raw)

    def producer_id(self, prod: Producer) -> tuple[int, int]:
        def assigned() -> bool:
            prod.poll(0.05)
            return self.latest.get("eos", {}).get("idemp_state") == "Assigned"

        wait_until(assigned, message="the producer's id in its statistics")
        return self.latest["eos"]["producer_id"], self.latest["eos"]["producer_epoch"]


def _idempotent_producer(bootstrap: str, stats: _Stats) -> Producer:
    return producer(
        bootstrap,
        **IDEMPOTENT,
        **{"statistics.interval.ms": 100, "stats_cb": stats.callback},
    )


def _check_sequences(batches: list[DecodedBatch], producer_id: int, first_offset: int) -> None:
    """The batches of one producer session on a partition: its id, epoch 0, and sequences
    counting records from 0, batch after batch."""
    sequence = 0
    for batch in batches:
        assert (batch.producer_id, batch.producer_epoch) == (producer_id, 0)
        assert batch.base_sequence == sequence, batch.base_offset
        assert batch.base_offset - first_offset == sequence
        sequence += batch.next_offset - batch.base_offset


def test_many_in_flight_exactly_once_in_order(target, topic_name: Callable[..., str]) -> None:
    partitions, per_partition = 3, 3000
    topic = topic_name()
    create_topic(target.bootstrap, topic, partitions)
    stats = _Stats()
    prod = _idempotent_producer(target.bootstrap, stats)
    messages = [
        {"value": b"%d-%06d" % (i % partitions, i // partitions), "partition": i % partitions}
        for i in range(partitions * per_partition)
    ]
    deliveries = produce_all(prod, topic, messages, timeout=60)
    producer_id, epoch = stats.producer_id(prod)
    assert producer_id >= 0 and epoch == 0

    consumed = consume_all(target.bootstrap, topic, range(partitions), timeout=60)
    for p in range(partitions):
        assert [c.value for c in consumed[p]] == [
            m["value"] for m in messages if m["partition"] == p
        ], f"partition {p}: duplicates, gaps or reordering"
        assert [c.offset for c in consumed[p]] == list(range(per_partition))
    stored = {(c.partition, c.offset): c.value for p in consumed.values() for c in p}
    assert {(d.partition, d.offset): d.value for d in deliveries.succeeded} == stored

    batches = stored_batches(target.bootstrap, topic, 0)
    assert len(batches) > 10, "expected many batches"
    _check_sequences(batches, producer_id, 0)


def test_restarted_producer_gets_a_new_producer_id(target, topic_name: Callable[..., str]) -> None:
    """A second producer session (no transactional id) gets a new producer id; its
    sequences start again at 0, and nothing of the first session is written twice."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    ids = []
    values = []
    for session in range(2):
        stats = _Stats()
        prod = _idempotent_producer(target.bootstrap, stats)
        batch = [b"s%d-%04d" % (session, i) for i in range(500)]
        produce_all(prod, topic, ({"value": v, "partition": 0} for v in batch))
        ids.append(stats.producer_id(prod))
        values += batch
        assert prod.flush(CLIENT_TIMEOUT) == 0
        del prod  # the session ends
    assert ids[0] != ids[1]

    consumed = consume_all(target.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == values
    batches = stored_batches(target.bootstrap, topic, 0)
    first = [b for b in batches if b.base_offset < 500]
    second = [b for b in batches if b.base_offset >= 500]
    _check_sequences(first, ids[0][0], 0)
    _check_sequences(second, ids[1][0], 500)


# -- on the wire -----------------------------------------------------------------------------


def _raw(bootstrap: str) -> RawClient:
    host, port = bootstrap.rsplit(":", 1)
    return RawClient(host, int(port))


def _init_producer_id(client: RawClient) -> tuple[int, int]:
    response = client.request(init_producer_id_request())
    assert _error_name(response.error_code) is None
    return response.producer_id, response.producer_epoch


def _produce(client: RawClient, topic: str, batch: bytes) -> tuple[str | None, int]:
    part = client.request(produce_request(topic, 0, batch)).responses[0].partition_responses[0]
    return _error_name(part.error_code), part.base_offset


def _batch(pid: int, epoch: int, sequence: int, count: int, tag: bytes) -> bytes:
    return simple_batch(count, tag, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)


def test_duplicate_batches_are_not_written(target, topic_name: Callable[..., str]) -> None:
    """The retry of one of a producer's last five batches is answered with its original
    offset and not appended; an older one, and a sequence gap, are OUT_OF_ORDER."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    with _raw(target.bootstrap) as client:
        pid, epoch = _init_producer_id(client)
        assert epoch == 0
        batches = {}
        sequence = 0
        for i, count in enumerate([3, 2, 2, 2, 2, 2]):
            batches[i] = _batch(pid, epoch, sequence, count, b"b%d" % i)
            assert _produce(client, topic, batches[i]) == (None, sequence)
            sequence += count
        assert watermarks(target.bootstrap, topic, 0) == (0, 13)
        got = {
            "last batch again": _produce(client, topic, batches[5]),
            "fourth back again": _produce(client, topic, batches[2]),
            "sixth back again": _produce(client, topic, batches[0])[0],
            "sequence gap": _produce(client, topic, _batch(pid, epoch, 20, 1, b"gap"))[0],
            "next in sequence": _produce(client, topic, _batch(pid, epoch, 13, 1, b"next")),
        }
    assert got == {
        "last batch again": (None, 11),
        "fourth back again": (None, 5),
        "sixth back again": "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "sequence gap": "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "next in sequence": (None, 13),
    }
    consumed = consume_all(target.bootstrap, topic, [0])[0]
    assert [c.value for c in consumed] == [
        b"b0-0", b"b0-1", b"b0-2", *(b"b%d-%d" % (i, j) for i in range(1, 6) for j in range(2)),
        b"next-0",
    ]  # fmt: skip


def test_pipelined_batches_keep_their_order(target, topic_name: Callable[..., str]) -> None:
    """Five Produce requests sent before reading any response (librdkafka's in-flight
    window): appended in request order, the offsets follow the sequences."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    with _raw(target.bootstrap) as client:
        pid, epoch = _init_producer_id(client)
        requests = [
            produce_request(topic, 0, _batch(pid, epoch, 4 * i, 4, b"p%d" % i)) for i in range(5)
        ]
        ids = [client.send(request) for request in requests]
        response_cls = response_class(0, type(requests[0]).__version__)
        answers = []
        for expected_id in ids:
            correlation_id, response = client.recv(response_cls)
            assert correlation_id == expected_id
            part = response.responses[0].partition_responses[0]
            answers.append((_error_name(part.error_code), part.base_offset))
    assert answers == [(None, 4 * i) for i in range(5)]
    batches = stored_batches(target.bootstrap, topic, 0)
    assert [(b.base_offset, b.base_sequence, b.producer_id) for b in batches] == [
        (4 * i, 4 * i, pid) for i in range(5)
    ]


def test_producer_new_to_a_partition_may_start_at_any_sequence(
    target, topic_name: Callable[..., str]
) -> None:
    """Kafka's ProducerAppendInfo: with no state for the producer on the partition, any
    sequence is accepted; the next batch must follow on."""
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    with _raw(target.bootstrap) as client:
        pid, epoch = _init_producer_id(client)
        got = [
            _produce(client, topic, _batch(pid, epoch, 7, 1, b"late")),
            _produce(client, topic, _batch(pid, epoch, 8, 1, b"next")),
            _produce(client, topic, _batch(pid, epoch, 12, 1, b"gap"))[0],
        ]
    assert got == [(None, 0), (None, 1), "OUT_OF_ORDER_SEQUENCE_NUMBER"]
