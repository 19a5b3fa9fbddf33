"""Share groups (KIP-932) end to end against an embedded broker, with confluent-kafka's
ShareConsumer (librdkafka's share consumer) and Apache Kafka 4.4's KafkaShareConsumer
(java/JavaShareConsumer.java, on the clients jar compat/ provisions): several consumers on ONE
partition, RELEASE, REJECT, the delivery count limit, records of aborted transactions, a
consumer closed without acknowledging, and a broker restart (consumers that hang or whose
connection drops: test_share_protocol.py, with a raw client).

Every wait is a deadline loop over a condition; counts are exact.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from kafkalite.testing import EmbeddedBroker

LOCK_MS = 1000
JAVA_SHARE_CONSUMER = "tests/integration/java/JavaShareConsumer.java"
BROKER = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
}
DEADLINE = 20.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", BROKER) as running:
        yield running


def share_consumer(broker: EmbeddedBroker, group: str, topic: str, **conf: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def assigned(broker: EmbeddedBroker, group: str, members: int) -> bool:
    """Every member has its assignment (its share-partitions are initialized then)."""
    described = broker.call(lambda: broker.broker.share_groups.coordinator.describe(group))
    return len(described.members) == members and all(m.assigned for m in described.members)


def poll_until(
    consumers: list[ShareConsumer],
    done: Callable[[], bool],
    on_message: Callable[[int, Any], None],
    timeout: float = DEADLINE,
) -> None:
    """Poll the consumers in turn until `done()`, handing each record to `on_message`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.1):
                assert message.error() is None, message.error()
                on_message(index, message)


def join(
    broker: EmbeddedBroker,
    consumers: list[ShareConsumer],
    group: str,
    on_message: Callable[[int, Any], None] | None = None,
) -> None:
    """Poll until every consumer has its assignment (records polled meanwhile go to
    `on_message`; without one there must be none)."""

    def unexpected(_: int, message: Any) -> None:
        raise AssertionError(f"record at {message.offset()} before the test produced it")

    ready = lambda: assigned(broker, group, len(consumers))  # noqa: E731
    poll_until(consumers, ready, on_message or unexpected)


def produce(broker: EmbeddedBroker, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(DEADLINE) == 0


def set_group_configs(broker: EmbeddedBroker, group: str, **configs: str) -> None:
    """kafka-configs --entity-type groups --alter, through confluent-kafka's AdminClient."""
    entries = [
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE)


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"queue-{suffix}", f"share-{suffix}"


def test_consumers_on_one_partition_share_it_and_each_record_is_delivered_once(
    broker: EmbeddedBroker,
) -> None:
    topic, group = names()
    broker.create_topic(topic, partitions=1)
    consumers = [share_consumer(broker, group, topic) for _ in range(3)]
    try:
        join(broker, consumers, group)
        delivered: Counter[int] = Counter()
        per_consumer: Counter[int] = Counter()

        def record(index: int, message: Any) -> None:
            delivered[message.offset()] += 1
            per_consumer[index] += 1

        waves, wave = 12, 10
        for number in range(waves):
            produce(broker, topic, [f"{number}-{i}".encode() for i in range(wave)])
            poll_until(
                consumers, lambda n=number: sum(delivered.values()) >= (n + 1) * wave, record
            )
        assert sorted(delivered) == list(range(waves * wave))
        assert set(delivered.values()) == {1}
        assert len(per_consumer) >= 2, per_consumer  # the partition was shared
    finally:
        for consumer in consumers:
            consumer.close()


def test_release_redelivers_with_count_two_and_reject_never_again(broker: EmbeddedBroker) -> None:
    topic, group = names()
    broker.create_topic(topic, partitions=1)
    consumer = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        join(broker, [consumer], group)
        produce(broker, topic, [b"accept", b"release", b"reject"])
        seen: list[tuple[int, int, bytes]] = []

        def acknowledge(_: int, message: Any) -> None:
            seen.append((message.offset(), message.delivery_count(), message.value()))
            kind = AcknowledgeType.ACCEPT
            if message.value() == b"release" and message.delivery_count() == 1:
                kind = AcknowledgeType.RELEASE
            elif message.value() == b"reject":
                kind = AcknowledgeType.REJECT
            consumer.acknowledge(message, kind)

        poll_until([consumer], lambda: len(seen) >= 3, acknowledge)
        consumer.commit_sync()
        poll_until([consumer], lambda: len(seen) >= 4, acknowledge)
        assert seen[3] == (1, 2, b"release")  # redelivered with delivery count 2
        consumer.commit_sync()
        # A record produced after: once it is in, the rejected one is known never to return.
        produce(broker, topic, [b"marker"])
        poll_until([consumer], lambda: any(v == b"marker" for _, _, v in seen), acknowledge)
        consumer.commit_sync()
        assert [offset for offset, _, _ in seen] == [0, 1, 2, 1, 3]
    finally:
        consumer.close()


def test_acknowledged_records_are_not_delivered_again_after_a_restart(tmp_path: Path) -> None:
    topic, group = names()
    data = tmp_path / "data"
    with EmbeddedBroker(data, BROKER) as broker:
        broker.create_topic(topic, partitions=1)
        consumer = share_consumer(
            broker, group, topic, **{"share.acknowledgement.mode": "explicit"}
        )
        join(broker, [consumer], group)
        produce(broker, topic, [f"v{i}".encode() for i in range(10)])
        seen: list[int] = []

        def accept_first_six(_: int, message: Any) -> None:
            seen.append(message.offset())
            if message.offset() < 6:  # the others stay unacknowledged: released at close
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)

        poll_until([consumer], lambda: len(seen) >= 10, accept_first_six)
        consumer.commit_sync()
        consumer.close()
    with EmbeddedBroker(data, BROKER) as broker:
        consumer = share_consumer(broker, group, topic)
        try:
            after: list[tuple[int, int]] = []
            collect = lambda _, m: after.append((m.offset(), m.delivery_count()))  # noqa: E731
            join(broker, [consumer], group, collect)
            produce(broker, topic, [b"after"])
            poll_until([consumer], lambda: (10, 1) in after, collect)
            # Offsets 0-5 were acknowledged before the restart: never delivered again.
            assert sorted(after) == [(6, 2), (7, 2), (8, 2), (9, 2), (10, 1)]
        finally:
            consumer.close()


def test_records_of_aborted_transactions_are_delivered_only_under_read_uncommitted(
    broker: EmbeddedBroker,
) -> None:
    topic, group = names()
    broker.create_topic(topic, partitions=1)
    set_group_configs(broker, group, share_isolation_level="read_committed")
    consumer = share_consumer(broker, group, topic)
    try:
        join(broker, [consumer], group)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": group})
        producer.init_transactions(DEADLINE)
        for value, commit in ((b"aborted", False), (b"committed", True)):
            producer.begin_transaction()
            producer.produce(topic, value=value)
            assert producer.flush(DEADLINE) == 0  # in the log before the abort (not purged)
            if commit:
                producer.commit_transaction(DEADLINE)
            else:
                producer.abort_transaction(DEADLINE)
        values: list[bytes] = []
        poll_until(
            [consumer], lambda: b"committed" in values, lambda _, m: values.append(m.value())
        )
        assert values == [b"committed"]
    finally:
        consumer.close()
    # Kafka's default share.isolation.level, read_uncommitted: both (never the markers).
    everything = f"{group}-uncommitted"
    set_group_configs(broker, everything, share_auto_offset_reset="earliest")
    consumer = share_consumer(broker, everything, topic)
    try:
        values = []
        poll_until([consumer], lambda: len(values) >= 2, lambda _, m: values.append(m.value()))
        assert values == [b"aborted", b"committed"]
    finally:
        consumer.close()


def test_released_at_the_delivery_count_limit_the_record_is_archived(
    broker: EmbeddedBroker,
) -> None:
    topic, group = names()
    broker.create_topic(topic, partitions=1)
    set_group_configs(broker, group, share_delivery_count_limit="3")
    consumer = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        join(broker, [consumer], group)
        produce(broker, topic, [b"poison"])
        counts: list[int] = []

        def release(_: int, message: Any) -> None:
            counts.append(message.delivery_count())
            kind = (
                AcknowledgeType.RELEASE if message.value() == b"poison" else AcknowledgeType.ACCEPT
            )
            consumer.acknowledge(message, kind)
            consumer.commit_sync()

        poll_until([consumer], lambda: len(counts) >= 3, release)
        produce(broker, topic, [b"marker"])
        poll_until([consumer], lambda: len(counts) >= 4, release)
        # The group's share.delivery.count.limit (3): delivered three times, then archived.
        assert counts == [1, 2, 3, 1]
    finally:
        consumer.close()


def test_records_of_a_consumer_closed_without_acknowledging_go_to_another(
    broker: EmbeddedBroker,
) -> None:
    topic, group = names()
    broker.create_topic(topic, partitions=1)
    first = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    join(broker, [first], group)
    produce(broker, topic, [b"a", b"b", b"c"])
    held: list[int] = []
    poll_until([first], lambda: len(held) >= 3, lambda _, m: held.append(m.offset()))
    first.close()  # nothing acknowledged: released when its session closes
    second = share_consumer(broker, group, topic)
    try:
        got: list[tuple[int, int]] = []
        poll_until(
            [second],
            lambda: len(got) >= 3,
            lambda _, m: got.append((m.offset(), m.delivery_count())),
        )
        assert sorted(got) == [(0, 2), (1, 2), (2, 2)]
    finally:
        second.close()


def test_java_share_consumer_accepts_and_releases(broker: EmbeddedBroker) -> None:
    """Apache Kafka 4.4's KafkaShareConsumer (explicit mode) against kafkalite."""
    from compat.kafka_dist import kafka_lib

    topic, group = names()
    broker.create_topic(topic, partitions=1)
    command = ["java", "-cp", f"{kafka_lib()}/*", JAVA_SHARE_CONSUMER]
    java = subprocess.Popen(
        [*command, broker.bootstrap, group, topic, "4", "v1"], stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60  # the JVM compiles the source first
        while not assigned(broker, group, 1):
            assert time.monotonic() < deadline and java.poll() is None, "the consumer never joined"
            time.sleep(0.1)  # polls the broker's state, not a synchronisation sleep
        produce(broker, topic, [b"v0", b"v1", b"v2"])
        out, _ = java.communicate(timeout=60)
    finally:
        if java.poll() is None:
            java.kill()
            java.wait()
    records = [line.split()[1:] for line in out.splitlines() if line.startswith("record ")]
    assert sorted(records) == [
        ["0", "1", "v0"],
        ["1", "1", "v1"],
        ["1", "2", "v1"],
        ["2", "1", "v2"],
    ]
    assert out.splitlines()[-1] == "closed"
    states = broker.call(lambda: dict(broker.broker.share_groups.partitions.coordinator.states))
    [state] = [state for key, state in states.items() if key.group_id == group]
    assert (state.start_offset, state.batches) == (3, ())  # everything acknowledged
