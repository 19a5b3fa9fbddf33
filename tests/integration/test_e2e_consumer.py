"""Consumer behaviour with librdkafka (assign mode): tailing the log, offset resets, fetch
size limits smaller than a message, concurrent producers and many partitions."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from e2e_helpers import (
    consume_all,
    consumer,
    create_topic,
    first_error,
    produce_all,
    producer,
    wait_until,
    watermarks,
)

from kafkalite.testing import BrokerProcess


def _wait_for_parked_fetch(cons: Consumer, statistics: list[str], topic: str, offset: int) -> None:
    """Poll (which serves the statistics callback, and must deliver nothing) until the
    consumer's latest statistics show it fetching `topic` partition 0 at `offset` with a
    request awaiting the broker's answer: a long poll parked at the log end."""

    def parked() -> bool:
        assert cons.poll(0.05) is None, "a message before it was produced"
        if not statistics:
            return False
        latest = json.loads(statistics[-1])
        partition = latest["topics"].get(topic, {}).get("partitions", {}).get("0", {})
        return (
            partition.get("fetch_state") == "active"
            and partition.get("next_offset") == offset
            and any(b["waitresp_cnt"] and b["req"].get("Fetch") for b in latest["brokers"].values())
        )

    wait_until(parked, 10, message=f"a fetch parked at offset {offset}")


def test_tailing_consumer_gets_new_messages_promptly(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """A consumer at the log end long-polls; a produce wakes it well before fetch.wait.max.ms."""
    topic = topic_name()
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, 1)
    produce_all(producer(bootstrap), topic, [{"value": b"old"}])
    statistics: list[str] = []
    cons = consumer(
        bootstrap,
        **{"fetch.wait.max.ms": 5000, "statistics.interval.ms": 50, "stats_cb": statistics.append},
    )
    try:
        cons.assign([TopicPartition(topic, 0, 1)])  # the log end
        prod = producer(bootstrap, **{"linger.ms": 0})
        latencies = []
        for i in range(3):
            _wait_for_parked_fetch(cons, statistics, topic, 1 + i)
            sent = time.monotonic()
            produce_all(prod, topic, [{"value": b"new-%d" % i}])
            message = None
            deadline = sent + 10
            while message is None and time.monotonic() < deadline:
                message = cons.poll(0.1)
            assert message is not None and message.error() is None
            assert (message.offset(), message.value()) == (1 + i, b"new-%d" % i)
            latencies.append(time.monotonic() - sent)
        assert max(latencies) < 2.5, f"long poll not woken by produce: {latencies}"
    finally:
        cons.close()


@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_offset_beyond_end_resets(
    module_broker: BrokerProcess, topic_name: Callable[..., str], reset: str
) -> None:
    topic = topic_name()
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, 1)
    produce_all(producer(bootstrap), topic, ({"value": b"v%d" % i} for i in range(5)))
    if reset == "error":
        error, _ = first_error(bootstrap, topic, 0, 100, **{"auto.offset.reset": "error"})
        assert error is not None
        assert error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
        return
    if reset == "earliest":
        _, offsets = first_error(bootstrap, topic, 0, 100, **{"auto.offset.reset": "earliest"})
        assert offsets == [0]
        return
    # latest: the consumer resets to the log end: it never sees offsets below 5, and sees
    # what is produced after the reset.
    cons = consumer(bootstrap, **{"auto.offset.reset": "latest"})
    prod = producer(bootstrap, **{"linger.ms": 0})
    try:
        cons.assign([TopicPartition(topic, 0, 100)])
        deadline = time.monotonic() + 20
        message = None
        sent = 0
        while message is None:
            assert time.monotonic() < deadline, "nothing consumed after the reset"
            produce_all(prod, topic, [{"value": b"after-reset-%d" % sent}])
            sent += 1
            message = cons.poll(0.3)
        assert message.error() is None
        assert message.offset() >= 5
        assert message.value().startswith(b"after-reset-")
    finally:
        cons.close()


def test_fetch_limits_smaller_than_a_message(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """KIP-74: a consumer whose fetch limits are below one batch still makes progress."""
    topic = topic_name()
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    values = [bytes([i]) * 50_000 for i in range(6)]
    produce_all(
        producer(bootstrap, **{"linger.ms": 0}),
        topic,
        ({"value": v, "partition": i % 2} for i, v in enumerate(values)),
    )
    consumed = consume_all(
        bootstrap,
        topic,
        [0, 1],
        **{"fetch.max.bytes": 1024, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1024},
    )
    assert [c.value for c in consumed[0]] == values[0::2]
    assert [c.value for c in consumed[1]] == values[1::2]


def test_concurrent_producers_get_distinct_contiguous_offsets(
    module_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    topic = topic_name()
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    per_producer, producers = 2_000, 4
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            deliveries = produce_all(
                producer(bootstrap, **{"linger.ms": 1}),
                topic,
                (
                    {"value": b"p%d-%05d" % (index, i), "partition": i % 2}
                    for i in range(per_producer)
                ),
            )
            results[index] = deliveries.succeeded
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads)
    offsets = [(d.partition, d.offset) for ds in results.values() for d in ds]
    assert len(offsets) == len(set(offsets)) == per_producer * producers
    consumed = consume_all(bootstrap, topic, [0, 1])
    for partition in (0, 1):
        got = consumed[partition]
        assert [c.offset for c in got] == list(range(per_producer * producers // 2))
        # Each producer's messages keep their order within the partition.
        for index in range(producers):
            mine = [c.value for c in got if c.value.startswith(b"p%d-" % index)]
            assert mine == sorted(mine)
    stored = {(p, c.offset): c.value for p in consumed for c in consumed[p]}
    for ds in results.values():
        for d in ds:
            assert stored[(d.partition, d.offset)] == d.value


def test_many_partitions(module_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    bootstrap = module_broker.bootstrap
    partitions = 64
    create_topic(bootstrap, topic, partitions)
    produce_all(
        producer(bootstrap),
        topic,
        ({"value": b"%d" % p, "partition": p} for p in range(partitions) for _ in range(3)),
    )
    consumed = consume_all(bootstrap, topic, range(partitions))
    for p in range(partitions):
        assert [c.value for c in consumed[p]] == [b"%d" % p] * 3
        assert watermarks(bootstrap, topic, p) == (0, 3)
