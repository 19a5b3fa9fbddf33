"""Dead-letter topics of share groups (KIP-1191) end to end against an embedded broker, with
confluent-kafka's ShareConsumer: records REJECTed or released up to the delivery count limit
land in the group's dead-letter topic, once each, with Kafka's `__dlq.errors.*` headers;
the checks Kafka makes on the group config, the topic's opt-in and the broker's prefix.

Every wait is a deadline loop over a condition; counts are exact.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaError,
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
from kio.schema.errors import ErrorCode

from kafkalite.metrics import share_groups as share_group_metrics
from kafkalite.testing import EmbeddedBroker

DEADLINE = 20.0
BROKER = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.record.lock.duration.ms": "1000",
}
HEADERS = (
    "__dlq.errors.topic",
    "__dlq.errors.partition",
    "__dlq.errors.offset",
    "__dlq.errors.group",
    "__dlq.errors.delivery.count",
    "__dlq.errors.message",
)
REJECTED = "Offset rejected by client."
EXCEEDED = "Offset delivery count exceeded the threshold."


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", BROKER) as running:
        yield running


def alter_group(broker: EmbeddedBroker, group: str, **configs: str) -> str:
    """IncrementalAlterConfigs SET on the GROUP resource: the error message, "" if none."""
    entries = [
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        admin.incremental_alter_configs([resource])[resource].result(DEADLINE)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.INVALID_CONFIG
        return str(exc.args[0].str())
    return ""


def produce(broker: EmbeddedBroker, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", headers=[("trace", b"t")])
    assert producer.flush(DEADLINE) == 0


def consume_acknowledging(
    broker: EmbeddedBroker, group: str, topic: str, kind: dict[int, AcknowledgeType], done: int
) -> list[tuple[int, int]]:
    """A share consumer acknowledging offset o with kind[o] (else ACCEPT) until `done`
    deliveries; returns the (offset, delivery count) delivered."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    delivered: list[tuple[int, int]] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(delivered) < done:
            assert time.monotonic() < deadline, f"timed out: {delivered}"
            for message in consumer.poll(0.1):
                assert message.error() is None, message.error()
                delivered.append((message.offset(), message.delivery_count()))
                ack = kind.get(message.offset(), AcknowledgeType.ACCEPT)
                consumer.acknowledge(message, ack)
            try:
                consumer.commit_sync()
            except KafkaException:  # an acknowledgement that failed (the crash test)
                pass
    finally:
        consumer.close()
    return delivered


def read_all(broker: EmbeddedBroker, topic: str, count: int) -> list[Any]:
    """The topic's partition 0, from the start, once it holds exactly `count` records."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    deadline = time.monotonic() + DEADLINE
    try:
        while consumer.get_watermark_offsets(TopicPartition(topic, 0), 5.0)[1] < count:
            assert time.monotonic() < deadline, "timed out waiting for the dead letters"
            time.sleep(0.05)
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages: list[Any] = []
        while len(messages) < count:
            assert time.monotonic() < deadline, "timed out reading the dead letters"
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), 5.0)[1] == count
        return messages
    finally:
        consumer.close()


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def headers_of(message: Any) -> dict[str, str]:
    return {name: value.decode() for name, value in message.headers() or []}


def test_rejected_and_exhausted_records_go_to_the_dead_letter_topic_once(
    broker: EmbeddedBroker,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group, dlq = f"orders-{suffix}", f"workers-{suffix}", f"dlq.orders-{suffix}"
    broker.create_topic(topic)
    broker.create_topic(dlq, config={"errors.deadletterqueue.group.enable": "true"})
    assert (
        alter_group(
            broker,
            group,
            share_auto_offset_reset="earliest",
            share_delivery_count_limit="2",
            errors_deadletterqueue_topic_name=dlq,
            errors_deadletterqueue_copy_record_enable="true",
        )
        == ""
    )
    produce(broker, topic, 5)
    # 1 and 3 rejected; 4 released twice (the limit, 2); 0 and 2 accepted.
    kinds = {1: AcknowledgeType.REJECT, 3: AcknowledgeType.REJECT, 4: AcknowledgeType.RELEASE}
    delivered = consume_acknowledging(broker, group, topic, kinds, done=6)
    assert sorted(delivered) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (4, 2)]
    letters = read_all(broker, dlq, 3)
    seen = [(m.key(), m.value(), [name for name, _ in m.headers()], headers_of(m)) for m in letters]
    expected = [
        (
            f"k{offset}".encode(),
            f"v{offset}".encode(),
            list(HEADERS),
            {
                "__dlq.errors.topic": topic,
                "__dlq.errors.partition": "0",
                "__dlq.errors.offset": str(offset),
                "__dlq.errors.group": group,
                "__dlq.errors.delivery.count": str(count),
                "__dlq.errors.message": message,
            },
        )
        for offset, count, message in ((1, 1, REJECTED), (3, 1, REJECTED), (4, 2, EXCEEDED))
    ]
    assert seen == expected  # the original header ("trace") is not copied, as Kafka
    # All five settled (ARCHIVING, then ARCHIVED once written): the SPSO passed them.
    manager = broker.broker.share_groups.partitions
    [key] = [k for k in broker.call(lambda: list(manager.held)) if k.group_id == group]
    wait_for(lambda: broker.call(lambda: manager.held[key].state.start_offset) == 5)
    assert broker.call(lambda: manager.held[key].state.dead_letters) == {}
    # Kafka's ShareGroupMetrics meters, as Prometheus counters.
    families = broker.call(lambda: list(share_group_metrics.collect(manager)))
    meters = {
        f.name.removeprefix("kafka_server_sharegroupmetrics_"): s.value
        for f in families
        for s in f.samples
        if "deadletterqueue" in f.name and s.labels == {"group": group}
    }
    # One append per acknowledgement that archived some: the two REJECTs may share one.
    produced = meters.pop("deadletterqueuetotalproducerequests")
    assert produced in (2, 3)
    assert meters == {"deadletterqueuerecordcount": 3, "deadletterqueuefailedproducerequests": 0}


def test_the_dead_letter_topic_is_checked_as_kafka_does(tmp_path: Path) -> None:
    """Without errors.deadletterqueue.group.enable on the topic, or without the broker's
    prefix, nothing is written and the records are archived; a missing topic is created
    when the broker says so, and then holds only the headers (no copy)."""
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"orders-{suffix}", f"workers-{suffix}"
    with EmbeddedBroker(tmp_path / "data", BROKER) as broker:
        # A dynamic broker config, as in Kafka (here for this broker).
        auto_create = ConfigEntry(
            "errors.deadletterqueue.auto.create.topics.enable",
            "true",
            incremental_operation=AlterConfigOpType.SET,
        )
        node = str(broker.call(lambda: broker.broker.node_id))
        cluster = ConfigResource(ResourceType.BROKER, node, incremental_configs=[auto_create])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.incremental_alter_configs([cluster])[cluster].result(DEADLINE)
        internal = alter_group(broker, group, errors_deadletterqueue_topic_name="__offsets")
        assert internal == (
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
        )
        assert alter_group(broker, group, errors_deadletterqueue_copy_record_enable="1") == (
            "Invalid value 1 for configuration errors.deadletterqueue.copy.record.enable: "
            "Expected value to be either true or false"
        )
        broker.create_topic(topic)
        not_enabled, unprefixed = f"dlq.off-{suffix}", f"letters-{suffix}"
        broker.create_topic(not_enabled)
        created = f"dlq.auto-{suffix}"
        alter_group(broker, group, share_auto_offset_reset="earliest")
        reject = {0: AcknowledgeType.REJECT}
        for offset, dlq in enumerate((not_enabled, unprefixed, created)):
            assert alter_group(broker, group, errors_deadletterqueue_topic_name=dlq) == ""
            produce(broker, topic, 1)
            kinds = {offset: AcknowledgeType.REJECT} if offset else reject
            assert consume_acknowledging(broker, group, topic, kinds, done=1) == [(offset, 1)]
        [letter] = read_all(broker, created, 1)
        assert (letter.key(), letter.value(), headers_of(letter)["__dlq.errors.offset"]) == (
            None,
            None,
            "2",
        )
        metadata = broker.call(lambda: broker.broker.replica_manager.metadata.topics)
        assert metadata[created].configs["errors.deadletterqueue.group.enable"] == "true"
        assert unprefixed not in metadata  # refused before any creation
        ends = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ends"})
        try:
            assert ends.get_watermark_offsets(TopicPartition(not_enabled, 0), 5.0) == (0, 0)
        finally:
            ends.close()


def setup_group(broker: EmbeddedBroker, suffix: str) -> tuple[str, str, str]:
    topic, group, dlq = f"orders-{suffix}", f"workers-{suffix}", f"dlq.orders-{suffix}"
    broker.create_topic(topic)
    broker.create_topic(dlq, config={"errors.deadletterqueue.group.enable": "true"})
    configs = {"share_auto_offset_reset": "earliest", "errors_deadletterqueue_topic_name": dlq}
    assert alter_group(broker, group, **configs) == ""
    produce(broker, topic, 1)
    return topic, group, dlq


def after_restart(data: Path, topic: str, group: str, dlq: str) -> None:
    """The share-partition, loaded by a member's first fetch (which acknowledges nothing),
    has its dead letter written once; offset 0 is not delivered again."""
    with EmbeddedBroker(data, BROKER) as broker:
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        consumer.subscribe([topic])
        ends = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ends"})
        try:
            deadline = time.monotonic() + DEADLINE
            while ends.get_watermark_offsets(TopicPartition(dlq, 0), 5.0)[1] < 1:
                assert time.monotonic() < deadline, "the dead letter was not written"
                assert len(consumer.poll(0.1)) == 0
            produce(broker, topic, 1)  # offset 1: once it is delivered, offset 0 is settled
            delivered: list[tuple[int, int]] = []
            while not delivered:
                assert time.monotonic() < deadline, "timed out"
                delivered += [(m.offset(), m.delivery_count()) for m in consumer.poll(0.1)]
            assert delivered == [(1, 1)]
        finally:
            consumer.close()
            ends.close()
        [letter] = read_all(broker, dlq, 1)
        assert headers_of(letter) == {
            "__dlq.errors.topic": topic,
            "__dlq.errors.partition": "0",
            "__dlq.errors.offset": "0",
            "__dlq.errors.group": group,
            "__dlq.errors.delivery.count": "1",
            "__dlq.errors.message": REJECTED,
        }


def test_a_dead_letter_not_written_when_the_broker_stops_is_written_after_the_restart(
    tmp_path: Path,
) -> None:
    """The record's ARCHIVING state is committed (the REJECT answered) but the broker stops
    before its dead letter is written: after the restart it is written, once."""
    data, suffix = tmp_path / "data", uuid.uuid4().hex[:6]
    with EmbeddedBroker(data, BROKER) as broker:
        topic, group, dlq = setup_group(broker, suffix)
        writer = broker.call(lambda: broker.broker.share_groups.partitions.dead_letters)

        async def hang(*_: Any) -> ErrorCode:
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        broker.call(lambda: setattr(writer, "write", hang))
        reject = {0: AcknowledgeType.REJECT}
        assert consume_acknowledging(broker, group, topic, reject, done=1) == [(0, 1)]
        ends = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ends"})
        try:
            assert ends.get_watermark_offsets(TopicPartition(dlq, 0), 5.0) == (0, 0)
        finally:
            ends.close()
    after_restart(data, topic, group, dlq)


def test_a_dead_letter_written_before_a_crash_is_not_written_again(tmp_path: Path) -> None:
    """The dead-letter record is committed but the record's ARCHIVED state is not (here: the
    state write fails, then the broker stops). After the restart the record is ARCHIVING
    again; its dead letter, already in the topic, is not written twice."""
    data, suffix = tmp_path / "data", uuid.uuid4().hex[:6]
    with EmbeddedBroker(data, BROKER) as broker:
        topic, group, dlq = setup_group(broker, suffix)
        coordinator = broker.call(lambda: broker.broker.share_groups.partitions.coordinator)
        write_state = coordinator.write_state

        async def archived_is_lost(*args: Any) -> ErrorCode:
            if args[2] > 0:  # the start offset past the record: its ARCHIVED state
                return ErrorCode.coordinator_not_available
            return await write_state(*args)

        broker.call(lambda: setattr(coordinator, "write_state", archived_is_lost))
        reject = {0: AcknowledgeType.REJECT}
        assert consume_acknowledging(broker, group, topic, reject, done=1) == [(0, 1)]
        read_all(broker, dlq, 1)
    after_restart(data, topic, group, dlq)
