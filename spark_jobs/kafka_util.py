"""Small confluent-kafka helpers shared by the jobs, the generator, the tests and the bench."""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# librdkafka logs every failed connection attempt to stderr; the callers report failures
# themselves, in one line.
_QUIET = {"log_level": 0}


class BrokerUnreachable(RuntimeError):
    """No Kafka broker answered a Metadata request at the bootstrap address."""


def check_broker(bootstrap: str, timeout: float = 5.0) -> int:
    """Raise BrokerUnreachable unless a broker answers Metadata; return its broker count."""
    _check_tcp(bootstrap, timeout)
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        reason = error.str() if isinstance(error, KafkaError) else str(error)
        raise BrokerUnreachable(
            f"no Kafka broker reachable at {bootstrap} within {timeout:g}s ({reason})"
        ) from exc
    except ValueError as exc:  # a malformed bootstrap string is caught by librdkafka here
        raise BrokerUnreachable(f"bad bootstrap address {bootstrap!r}: {exc}") from exc
    return len(metadata.brokers)


def broker_answers(bootstrap: str) -> bool:
    """For the command lines: check_broker, False after one `error:` line on stderr (they
    exit with code 2 then)."""
    try:
        check_broker(bootstrap)
    except BrokerUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True


def _check_tcp(bootstrap: str, timeout: float) -> None:
    """Fail at once when no bootstrap address accepts a TCP connection (librdkafka would
    retry until the timeout)."""
    failures = []
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        host = host.strip("[]") or "localhost"
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except ValueError:
            raise BrokerUnreachable(f"bad bootstrap address {address!r} (HOST:PORT)") from None
        except OSError as exc:
            failures.append(f"{address.strip()}: {exc.strerror or exc}")
    raise BrokerUnreachable(f"no Kafka broker reachable at {bootstrap} ({'; '.join(failures)})")


BROKER_DEFAULT = -1  # CreateTopics: the broker's default.replication.factor


def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    timeout: float = 30.0,
    replication_factor: int = BROKER_DEFAULT,
) -> None:
    """Create the topic unless it exists (by default with the broker's
    default.replication.factor: 1 on a single node, e.g. 3 on a replicated cluster)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    if topic in admin.list_topics(timeout=timeout).topics:
        return
    new_topic = NewTopic(topic, partitions, replication_factor)
    future = admin.create_topics([new_topic], operation_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # until Metadata shows every partition with a leader
        found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if found and not found.error and len(found.partitions) == partitions:
            if all(p.leader >= 0 for p in found.partitions.values()):
                return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after {timeout:g}s")


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def end_offsets(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """{partition: high watermark}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-jobs-probe", **_QUIET})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics[topic]
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in sorted(metadata.partitions)
        }
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Record]:
    """Every record of the topic up to the high watermarks at call time (no group, no commits),
    in (partition, offset) order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spark-jobs-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **_QUIET,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            for p in sorted(metadata.partitions)
        }
        pending = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {sorted(pending)} not at the end")
            for message in consumer.consume(10_000, 1.0):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= ends[message.partition()][1]:
                            pending.discard(message.partition())
                        continue
                    raise KafkaException(message.error())
                partition, offset = message.partition(), message.offset()
                if offset >= ends[partition][1]:
                    pending.discard(partition)
                    continue
                records.append(
                    Record(
                        partition, offset, message.key(), message.value(), message.timestamp()[1]
                    )
                )
                if offset + 1 >= ends[partition][1]:
                    pending.discard(partition)
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()
