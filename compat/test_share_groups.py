"""Share groups (KIP-932), the same on kafkalite and Apache Kafka 4.4, with confluent-kafka's
ShareConsumer: several consumers on ONE partition (every record delivered once, split between
them), RELEASE (delivered again, delivery count 2), REJECT (never again), and the delivery
count limit (group.share.delivery.count.limit, 5: then archived).

Both brokers start a share-partition at the end of the log (share.auto.offset.reset=latest),
Kafka when its first ShareFetch arrives, kafkalite when the partition is assigned; so every
scenario first produces warm-up records until a consumer receives one, then counts from
there. Consumers are polled in turn from the test's thread.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from compat.scenario_helpers import create_topic
from compat.targets import Target

DEADLINE = 60.0  # Kafka assigns at a later heartbeat (5 s apart) than the join


def share_consumer(target: Target, group: str, topic: str, **conf: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def produce(target: Target, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0


def poll_until(
    consumers: list[ShareConsumer], done: Callable[[], bool], on_message: Callable[[int, Any], None]
) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.1):
                assert message.error() is None, message.error()
                on_message(index, message)


def warm_up(target: Target, topic: str, consumers: list[ShareConsumer], ack: bool = False) -> int:
    """Produce warm-up records until one is received: the share-partition has started.
    Returns how many records the topic then holds."""
    warmed: list[int] = []

    def record(index: int, message: Any) -> None:
        warmed.append(message.offset())
        if ack:
            consumers[index].acknowledge(message, AcknowledgeType.ACCEPT)

    deadline = time.monotonic() + DEADLINE
    while not warmed:
        assert time.monotonic() < deadline, "no consumer received a warm-up record"
        produce(target, topic, [b"warm-up"])
        end = time.monotonic() + 2
        while not warmed and time.monotonic() < end:
            for index, consumer in enumerate(consumers):
                for message in consumer.poll(0.1):
                    record(index, message)
    if ack:
        for consumer in consumers:
            consumer.commit_sync()
    return max(warmed) + 1


def test_consumers_on_one_partition_each_record_once(
    target: Target, topic_name: Callable[..., str]
) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic)
    consumers = [share_consumer(target, group, topic) for _ in range(3)]
    try:
        start = warm_up(target, topic, consumers)
        delivered: Counter[int] = Counter()
        per_consumer: Counter[int] = Counter()

        def record(index: int, message: Any) -> None:
            if message.value() != b"warm-up":
                delivered[message.offset()] += 1
                per_consumer[index] += 1

        waves, wave = 10, 10
        for number in range(waves):
            produce(target, topic, [f"{number}-{i}".encode() for i in range(wave)])
            poll_until(
                consumers, lambda n=number: sum(delivered.values()) >= (n + 1) * wave, record
            )
        assert set(delivered.values()) == {1}
        assert len(delivered) == waves * wave
        assert min(delivered) >= start
        assert len(per_consumer) >= 2, per_consumer
    finally:
        for consumer in consumers:
            consumer.close()


def test_release_then_count_two_reject_never_and_the_delivery_count_limit(
    target: Target, topic_name: Callable[..., str]
) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic)
    consumer = share_consumer(target, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        warm_up(target, topic, [consumer], ack=True)
        produce(target, topic, [b"release-once", b"reject", b"poison"])
        seen: list[tuple[bytes, int]] = []

        def acknowledge(_: int, message: Any) -> None:
            value, count = message.value(), message.delivery_count()
            seen.append((value, count))
            kind = AcknowledgeType.ACCEPT
            if value == b"poison" or (value == b"release-once" and count == 1):
                kind = AcknowledgeType.RELEASE
            elif value == b"reject":
                kind = AcknowledgeType.REJECT
            consumer.acknowledge(message, kind)
            consumer.commit_sync()

        poll_until([consumer], lambda: (b"poison", 5) in seen, acknowledge)
        produce(target, topic, [b"marker"])
        poll_until([consumer], lambda: any(v == b"marker" for v, _ in seen), acknowledge)
        assert sorted(seen) == sorted(
            [(b"release-once", 1), (b"release-once", 2), (b"reject", 1), (b"marker", 1)]
            + [(b"poison", count) for count in range(1, 6)]
        )
    finally:
        consumer.close()
