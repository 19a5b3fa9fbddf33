"""Share groups (KIP-932), the same on kafkalite and Apache Kafka 4.4, with confluent-kafka's
ShareConsumer: several consumers on ONE partition (every record delivered once, split between
them), RELEASE (delivered again, delivery count 2), REJECT (never again), and the delivery
count limit (group.share.delivery.count.limit, 5: then archived); and dead-letter topics
(KIP-1191), their records and headers.

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

from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

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


DLQ_HEADERS = (
    "__dlq.errors.topic",
    "__dlq.errors.partition",
    "__dlq.errors.offset",
    "__dlq.errors.group",
    "__dlq.errors.delivery.count",
    "__dlq.errors.message",
)


def alter_group(target: Target, group: str, configs: dict[str, str]) -> str:
    """IncrementalAlterConfigs SET on the group: the error's name ("" when none)."""
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    try:
        admin.incremental_alter_configs([resource])[resource].result(20)
    except KafkaException as exc:
        return str(exc.args[0].name())
    return ""


def read_dead_letters(target: Target, topic: str, count: int) -> list[Any]:
    """Partition 0 of the dead-letter topic, once it holds `count` records (no more)."""
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
        }
    )
    deadline = time.monotonic() + DEADLINE
    try:
        while consumer.get_watermark_offsets(TopicPartition(topic, 0), 10.0)[1] < count:
            assert time.monotonic() < deadline, "timed out waiting for the dead letters"
            time.sleep(0.1)
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages: list[Any] = []
        while len(messages) < count:
            assert time.monotonic() < deadline, "timed out reading the dead letters"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), 10.0)[1] == count
        return messages
    finally:
        consumer.close()


def test_dead_letter_topic_gets_rejected_and_exhausted_records_with_kafkas_headers(
    target: Target, topic_name: Callable[..., str]
) -> None:
    """KIP-1191 (share.version 2, finalized by default on both): REJECTed records and a
    record released up to share.delivery.count.limit go to the group's dead-letter topic,
    with the six `__dlq.errors.*` headers and, copied, their key and value."""
    topic, group = topic_name(), topic_name("group")
    dlq = "dlq." + topic_name("letters")
    create_topic(target.bootstrap, topic)
    create_topic(target.bootstrap, dlq, config={"errors.deadletterqueue.group.enable": "true"})
    # Kafka's checks of the group configs (the prefix and the topic's opt-in: at the write).
    refused = [
        {"errors.deadletterqueue.topic.name": "__internal"},
        {"errors.deadletterqueue.copy.record.enable": "maybe"},
    ]
    assert [alter_group(target, group, c) for c in refused] == ["INVALID_CONFIG"] * 2
    configs = {
        "share.delivery.count.limit": "2",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.copy.record.enable": "true",
    }
    assert alter_group(target, group, configs) == ""
    consumer = share_consumer(target, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        first = warm_up(target, topic, [consumer], ack=True)
        producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
        for value in (b"reject", b"accept", b"poison"):
            producer.produce(topic, key=value, value=value, headers=[("trace", b"t")])
        assert producer.flush(20) == 0
        seen: list[tuple[bytes, int]] = []

        def acknowledge(_: int, message: Any) -> None:
            seen.append((message.value(), message.delivery_count()))
            kind = {b"reject": AcknowledgeType.REJECT, b"poison": AcknowledgeType.RELEASE}
            consumer.acknowledge(message, kind.get(message.value(), AcknowledgeType.ACCEPT))
            consumer.commit_sync()

        poll_until([consumer], lambda: (b"poison", 2) in seen, acknowledge)
        letters = read_dead_letters(target, dlq, 2)
    finally:
        consumer.close()
    found = sorted(
        (m.key(), m.value(), [n for n, _ in m.headers()], {n: v.decode() for n, v in m.headers()})
        for m in letters
    )
    expected = [
        (
            value,
            value,
            list(DLQ_HEADERS),
            {
                "__dlq.errors.topic": topic,
                "__dlq.errors.partition": "0",
                "__dlq.errors.offset": str(offset),
                "__dlq.errors.group": group,
                "__dlq.errors.delivery.count": str(count),
                "__dlq.errors.message": message,
            },
        )
        for value, offset, count, message in (
            (b"poison", first + 2, 2, "Offset delivery count exceeded the threshold."),
            (b"reject", first, 1, "Offset rejected by client."),
        )
    ]
    assert found == expected
