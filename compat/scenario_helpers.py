"""Helpers for the differential scenarios (compat/test_*.py): confluent-kafka clients against
a target (kafkalite or Apache Kafka) given by its bootstrap address.

Every wait is a deadline loop over a condition (the timeout is a failure bound, never a way
to synchronise). Errors are compared by name (`KafkaError.name()`), the way a client sees
them, so a failing assertion reads the same on both targets.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from protocol_tests.batches import DecodedBatch, decode_batches
from protocol_tests.raw_client import RawClient, fetch_request
from tests.integration.e2e_helpers import (  # noqa: F401 (re-exported)
    Consumed,
    first_error,
    producer,
    wait_until,
)

CLIENT_TIMEOUT = 20.0


# -- clients ---------------------------------------------------------------------------------


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    """An assign-mode consumer (the group id is required by librdkafka, never joined)."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-assign-only",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )


# One AdminClient and one query consumer (watermarks, offsets_for_times) per broker, kept for
# the session: a fresh librdkafka client sometimes loses its first metadata request when it
# swaps the bootstrap connection for the broker's own (1-3 s of retry backoff), so the shared
# clients are warmed up once with a metadata request. Keeping them referenced also keeps
# confluent-kafka from failing the futures of a garbage-collected AdminClient (_DESTROY).
_ADMINS: dict[str, AdminClient] = {}
_QUERY_CONSUMERS: dict[str, Consumer] = {}


def _warm_up(client: Any) -> None:
    """One successful metadata request (the first may fail with _TRANSPORT in that swap)."""

    def answered() -> bool:
        try:
            client.list_topics(timeout=CLIENT_TIMEOUT)
        except KafkaException:
            return False
        return True

    wait_until(answered, timeout=CLIENT_TIMEOUT, message="a first metadata response")


def admin(bootstrap: str) -> AdminClient:
    client = _ADMINS.get(bootstrap)
    if client is None:
        client = AdminClient({"bootstrap.servers": bootstrap})
        _warm_up(client)
        _ADMINS[bootstrap] = client
    return client


def query_consumer(bootstrap: str) -> Consumer:
    """A shared assign-mode consumer that is never assigned: for watermark and timestamp
    lookups only."""
    client = _QUERY_CONSUMERS.get(bootstrap)
    if client is None:
        # Short metadata refresh: librdkafka caches "unknown topic" answers.
        client = consumer(
            bootstrap,
            **{"group.id": "compat-queries", "topic.metadata.refresh.interval.ms": 1000},
        )
        _warm_up(client)
        _QUERY_CONSUMERS[bootstrap] = client
    return client


def close_shared_clients() -> None:
    """Close the shared clients (so they do not outlive their brokers, reconnecting and
    logging about it); the next use creates new ones."""
    consumers = list(_QUERY_CONSUMERS.values())
    _QUERY_CONSUMERS.clear()
    _ADMINS.clear()
    for client in consumers:
        client.close()


@pytest.fixture(scope="module", autouse=True)
def shared_clients_closed() -> Iterator[None]:
    """Import into a test module to close the shared clients after its tests."""
    yield
    close_shared_clients()


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    futures = admin(bootstrap).create_topics(
        [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10
    )
    futures[name].result(timeout=CLIENT_TIMEOUT)
    wait_topic_ready(bootstrap, name, partitions)


def wait_topic_ready(bootstrap: str, name: str, partitions: int) -> None:
    """Until the broker's metadata shows every partition with a leader, and every partition
    answers ListOffsets. Kafka answers CreateTopics once the controller committed the topic;
    the broker learns of it a moment later, and creates the partitions' logs after that:
    until then a produce gets NOT_LEADER_OR_FOLLOWER, which an acks=0 producer cannot retry
    (Kafka closes the connection)."""

    def known() -> bool:
        topic = admin(bootstrap).list_topics(name, timeout=CLIENT_TIMEOUT).topics.get(name)
        return (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
        )

    def served() -> bool:
        try:
            for partition in range(partitions):
                watermarks(bootstrap, name, partition)
        except KafkaException:
            return False
        return True

    wait_until(known, message=f"metadata of {name} with leaders")
    wait_until(served, message=f"the partitions of {name} to be served")


_COORDINATOR_READY: set[str] = set()


def wait_group_coordinator(bootstrap: str) -> None:
    """Until a group coordinator takes offset commits (once per broker). Kafka creates
    __consumer_offsets on the first FindCoordinator and answers NOT_COORDINATOR until its
    partitions are loaded; librdkafka's AlterConsumerGroupOffsets does not retry that."""
    if bootstrap in _COORDINATOR_READY:
        return
    topic = f"compat-coordinator-warm-up-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic, 1)
    request = ConsumerGroupTopicPartitions("compat-warm-up", [TopicPartition(topic, 0, 0)])

    def committed() -> bool:
        future = admin(bootstrap).alter_consumer_group_offsets([request])["compat-warm-up"]
        try:
            result = future.result(timeout=CLIENT_TIMEOUT)
        except KafkaException:
            return False
        return all(tp.error is None for tp in result.topic_partitions)

    wait_until(committed, timeout=60, interval=0.2, message="a group coordinator")
    _COORDINATOR_READY.add(bootstrap)


def topic_names(bootstrap: str) -> set[str]:
    """Every topic of the cluster (a Metadata request for all topics never creates one)."""
    return set(admin(bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics)


def error_of(future: Any, timeout: float = CLIENT_TIMEOUT) -> KafkaError:
    """The KafkaError an admin future fails with (AssertionError if it succeeds)."""
    try:
        result = future.result(timeout=timeout)
    except KafkaException as exc:
        return exc.args[0]
    raise AssertionError(f"expected an error, got {result!r}")


def error_name(future: Any, timeout: float = CLIENT_TIMEOUT) -> str:
    return error_of(future, timeout).name()


def broker_config(bootstrap: str, name: str) -> str:
    """The value of a broker property, read with DescribeConfigs from the first broker."""
    client = admin(bootstrap)
    broker_id = min(client.list_topics(timeout=CLIENT_TIMEOUT).brokers)
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = client.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT)
    return entries[name].value


# -- produce ---------------------------------------------------------------------------------


@dataclass
class Delivery:
    error: KafkaError | None
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: tuple[int, int]


@dataclass
class Deliveries:
    reports: list[Delivery] = field(default_factory=list)

    def callback(self, error: KafkaError | None, message: Message) -> None:
        self.reports.append(
            Delivery(
                error,
                message.topic(),
                message.partition(),
                message.offset(),
                message.key(),
                message.value(),
                message.timestamp(),
            )
        )

    @property
    def succeeded(self) -> list[Delivery]:
        return [d for d in self.reports if d.error is None]

    @property
    def failed(self) -> list[Delivery]:
        return [d for d in self.reports if d.error is not None]


def produce(
    prod: Producer, topic: str, messages: Iterable[dict[str, Any]], timeout: float = 30.0
) -> Deliveries:
    """Produce every message (kwargs of Producer.produce) and flush; failures are reported,
    not raised."""
    deliveries = Deliveries()
    for message in messages:
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while True:
            try:
                prod.produce(topic, on_delivery=deliveries.callback, **message)
                prod.poll(0)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise
                prod.poll(0.1)
    remaining = prod.flush(timeout)
    assert remaining == 0, f"{remaining} messages still queued after {timeout}s"
    return deliveries


def produce_all(
    prod: Producer, topic: str, messages: Iterable[dict[str, Any]], timeout: float = 30.0
) -> Deliveries:
    """Produce every message, flush, and require every delivery to succeed."""
    deliveries = produce(prod, topic, messages, timeout)
    failed = deliveries.failed
    assert not failed, f"{len(failed)} deliveries failed, first: {failed[0].error}"
    return deliveries


# -- consume ---------------------------------------------------------------------------------


def to_consumed(message: Message) -> Consumed:
    timestamp_type, timestamp = message.timestamp()
    return Consumed(
        message.partition(),
        message.offset(),
        message.key(),
        message.value(),
        tuple(message.headers() or ()),
        timestamp_type,
        timestamp,
    )


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) watermark, asked of the broker (ListOffsets earliest and latest)."""
    return query_consumer(bootstrap).get_watermark_offsets(
        TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT, cached=False
    )


def offsets_for_times(
    bootstrap: str, topic: str, stamps: Iterable[int], partition: int = 0
) -> list[int]:
    """Consumer.offsets_for_times, one lookup per timestamp (librdkafka merges the entries
    of one partition); -1: no record at or after the timestamp."""
    cons = query_consumer(bootstrap)
    found = [
        cons.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=CLIENT_TIMEOUT)[0]
        for ts in stamps
    ]
    errors = [tp.error for tp in found if tp.error is not None]
    assert not errors, errors
    return [tp.offset for tp in found]


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    start: int = OFFSET_BEGINNING,
    timeout: float = 30.0,
    **conf: Any,
) -> dict[int, list[Consumed]]:
    """Everything from `start` up to each partition's high watermark (read when called)."""
    partitions = list(partitions)
    cons = consumer(bootstrap, **conf)
    try:
        ends = {p: watermarks(bootstrap, topic, p)[1] for p in partitions}
        cons.assign([TopicPartition(topic, p, start) for p in partitions])
        out: dict[int, list[Consumed]] = {p: [] for p in partitions}

        def done() -> bool:
            return all(
                (out[p][-1].offset + 1 if out[p] else -1) >= ends[p]
                for p in partitions
                if ends[p] > 0
            )

        deadline = time.monotonic() + timeout
        while not done():
            counts = {p: len(v) for p, v in out.items()}
            assert time.monotonic() < deadline, f"consumed {counts} of {ends} in {timeout}s"
            message = cons.poll(0.2)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            out[message.partition()].append(to_consumed(message))
        return out
    finally:
        cons.close()


# -- raw fetch -------------------------------------------------------------------------------


def stored_batches(bootstrap: str, topic: str, partition: int) -> list[DecodedBatch]:
    """Every batch of the partition as the broker returns it (raw Fetch v12): what clients
    cannot see, e.g. the stored codec and the producer id and sequence of each batch."""
    host, port = bootstrap.rsplit(":", 1)
    end = watermarks(bootstrap, topic, partition)[1]
    batches: list[DecodedBatch] = []
    with RawClient(host, int(port)) as client:
        offset = 0
        while offset < end:
            response = client.request(fetch_request(topic, partition, offset))
            part = response.responses[0].partitions[0]
            assert part.error_code == 0, KafkaError(part.error_code).name()
            found = [b for b in decode_batches(part.records) if b.next_offset > offset]
            assert found, f"no batch at offset {offset}"
            batches += found
            offset = found[-1].next_offset
    return batches
