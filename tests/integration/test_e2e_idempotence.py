"""Idempotent producer (enable.idempotence=True): every message exactly once in the log."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from e2e_helpers import (
    Deliveries,
    consume_all,
    create_topic,
    produce_all,
    producer,
)

from kafkalite.testing import BrokerProcess

PARTITIONS = 4


def _check_exactly_once(consumed: dict, expected_values: list[bytes]) -> None:
    counts = Counter(c.value for p in consumed for c in consumed[p])
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated messages, e.g. {next(iter(duplicates))}"
    missing = set(expected_values) - set(counts)
    assert not missing, f"{len(missing)} messages missing"
    assert set(counts) == set(expected_values)
    for partition, records in consumed.items():
        assert [c.offset for c in records] == list(range(len(records))), partition
        # Per-partition order is the production order (values carry their sequence number).
        sequence = [int(c.value.split(b"-")[1]) for c in records]
        assert sequence == sorted(sequence), f"partition {partition} out of order"


def test_idempotent_producer_exactly_once(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    create_topic(module_broker.bootstrap, topic, PARTITIONS)
    prod = producer(
        module_broker.bootstrap,
        **{
            "enable.idempotence": True,
            "linger.ms": 1,
            "batch.num.messages": 100,
            "max.in.flight.requests.per.connection": 5,
        },
    )
    values = [b"m-%06d" % i for i in range(20_000)]
    deliveries = produce_all(prod, topic, ({"value": v, "key": v[-3:]} for v in values), timeout=60)
    assert len(deliveries.succeeded) == len(values)
    consumed = consume_all(module_broker.bootstrap, topic, range(PARTITIONS), timeout=60)
    _check_exactly_once(consumed, values)
    stored = {(c.partition, c.offset): c.value for p in consumed for c in consumed[p]}
    for d in deliveries.succeeded:
        assert stored[(d.partition, d.offset)] == d.value


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_idempotent_producer_across_broker_restart(
    broker: BrokerProcess, topic_name: Callable[..., str], how: str
) -> None:
    """The broker restarts (same port) while the idempotent producer has batches in flight:
    librdkafka retries them, and the broker must deduplicate from its persisted (SIGTERM)
    or rebuilt-from-the-log (SIGKILL) producer state, so the log still holds every message
    exactly once."""
    topic = topic_name()
    create_topic(broker.bootstrap, topic, PARTITIONS)
    deliveries = Deliveries()
    prod = producer(
        broker.bootstrap,
        **{
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 50,
            "message.timeout.ms": 60_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
        },
    )
    values = [b"r-%06d" % i for i in range(6_000)]
    for i, value in enumerate(values):
        while True:
            try:
                prod.produce(topic, value=value, key=value[-2:], on_delivery=deliveries.callback)
                break
            except BufferError:
                prod.poll(0.05)
        prod.poll(0)
        if i == len(values) // 2:
            if how == "sigterm":
                broker.restart()
            else:
                broker.kill()
                broker.restart()  # same port, so the producer reconnects
    assert prod.flush(60) == 0
    assert not deliveries.failed, deliveries.failed[0].error
    assert len(deliveries.succeeded) == len(values)
    consumed = consume_all(broker.bootstrap, topic, range(PARTITIONS), timeout=60)
    _check_exactly_once(consumed, values)
