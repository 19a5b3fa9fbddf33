"""Helpers for the end-to-end tests: confluent-kafka clients against a real broker process.

Consumers use assign mode (no consumer groups), never commit, and read until the high
watermark of every assigned partition; every wait is a deadline loop over a condition.
"""

from __future__ import annotations

import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

CLIENT_TIMEOUT = 20.0


def wait_until(
    condition: Callable[[], Any],
    timeout: float = 20.0,
    interval: float = 0.05,
    message: str = "condition",
) -> Any:
    """Poll `condition` until it returns something truthy (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


# -- clients ---------------------------------------------------------------------------------


def producer(bootstrap: str, **conf: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "message.timeout.ms": 30_000,
            "socket.connection.setup.timeout.ms": 10_000,
            **conf,
        }
    )


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafkalite-e2e-assign-only",  # required by librdkafka; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )


def read_to_end(
    bootstrap: str, partitions: list[tuple[str, int]], isolation: str
) -> list[tuple[str, int, bytes]]:
    """Every record a consumer with `isolation` gets, up to each partition's end (its
    position reaches the last stable offset / high watermark: markers have offsets too)."""
    cons: Consumer = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions]
        ends = {
            (t, p): cons.get_watermark_offsets(TopicPartition(t, p), CLIENT_TIMEOUT, False)[1]
            for t, p in partitions
        }
        cons.assign(tps)
        got: list[tuple[str, int, bytes]] = []

        def at_end() -> bool:
            message = cons.poll(0.1)
            if message is not None and not message.error():
                got.append((message.topic(), message.partition(), message.value()))
            positions = cons.position([TopicPartition(t, p) for t, p in partitions])
            return all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in positions)

        wait_until(at_end, timeout=30, interval=0, message="the consumer to reach the ends")
        return sorted(got)
    finally:
        cons.close()


# confluent-kafka fails the futures of an AdminClient that is garbage-collected
# (_DESTROY), so `admin(b).create_topics(...)[name].result()` needs the client kept alive:
# the most recent clients stay referenced here.
_RECENT_ADMINS: deque[AdminClient] = deque(maxlen=8)


def admin(bootstrap: str) -> AdminClient:
    client = AdminClient({"bootstrap.servers": bootstrap})
    _RECENT_ADMINS.append(client)
    return client


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
) -> None:
    futures = admin(bootstrap).create_topics(
        [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10
    )
    futures[name].result(timeout=CLIENT_TIMEOUT)


# -- produce ---------------------------------------------------------------------------------


@dataclass
class Delivery:
    error: KafkaError | None
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


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
            )
        )

    @property
    def succeeded(self) -> list[Delivery]:
        return [d for d in self.reports if d.error is None]

    @property
    def failed(self) -> list[Delivery]:
        return [d for d in self.reports if d.error is not None]


def produce_all(
    prod: Producer, topic: str, messages: Iterable[dict[str, Any]], timeout: float = 30.0
) -> Deliveries:
    """Produce every message (kwargs of Producer.produce), flush, and require success."""
    deliveries = Deliveries()
    for message in messages:
        _produce_with_backpressure(prod, topic, deliveries.callback, message)
    remaining = prod.flush(timeout)
    assert remaining == 0, f"{remaining} messages still queued after {timeout}s"
    failed = deliveries.failed
    assert not failed, f"{len(failed)} deliveries failed, first: {failed[0].error}"
    return deliveries


def _produce_with_backpressure(
    prod: Producer, topic: str, callback: Callable, message: dict[str, Any]
) -> None:
    deadline = time.monotonic() + CLIENT_TIMEOUT
    while True:
        try:
            prod.produce(topic, on_delivery=callback, **message)
            prod.poll(0)
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise
            prod.poll(0.1)


# -- consume ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: int
    timestamp: int


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    cons = consumer(bootstrap)
    try:
        return cons.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT, cached=False
        )
    finally:
        cons.close()


def low_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    return watermarks(bootstrap, topic, partition)[0]


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
        targets = {
            p: cons.get_watermark_offsets(
                TopicPartition(topic, p), timeout=CLIENT_TIMEOUT, cached=False
            )[1]
            for p in partitions
        }
        cons.assign([TopicPartition(topic, p, start) for p in partitions])
        out: dict[int, list[Consumed]] = {p: [] for p in partitions}

        def done() -> bool:
            return all(
                (out[p][-1].offset + 1 if out[p] else -1) >= targets[p]
                for p in partitions
                if targets[p] > 0
            )

        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, (
                f"consumed { ({p: len(v) for p, v in out.items()}) } of {targets} in {timeout}s"
            )
            message = cons.poll(0.2)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            timestamp_type, timestamp = message.timestamp()
            out[message.partition()].append(
                Consumed(
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    tuple(message.headers() or ()),
                    timestamp_type,
                    timestamp,
                )
            )
        return out
    finally:
        cons.close()


def first_error(
    bootstrap: str, topic: str, partition: int, offset: int, timeout: float = 20.0, **conf: Any
) -> tuple[KafkaError | None, list[int]]:
    """Consume from `offset` until an error or a message arrives: (error, offsets seen)."""
    cons = consumer(bootstrap, **conf)
    try:
        cons.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = cons.poll(0.2)
            if message is None:
                continue
            if message.error():
                return message.error(), []
            return None, [message.offset()]
        raise AssertionError(f"neither an error nor a message within {timeout}s")
    finally:
        cons.close()


# -- on-disk ---------------------------------------------------------------------------------


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return Path(data_dir) / f"{topic}-{partition}"


def segment_files(data_dir: Path, topic: str, partition: int) -> list[Path]:
    """The partition's `.log` segment files, oldest first."""
    directory = partition_dir(data_dir, topic, partition)
    return sorted(p for p in directory.iterdir() if p.name.endswith(".log"))


def batch_positions(log_file: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every whole batch in a segment file."""
    data = log_file.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        size = 12 + length
        if length <= 0 or pos + size > len(data):
            break
        out.append((pos, size, base_offset))
        pos += size
    return out


def batch_attributes(log_file: Path) -> list[int]:
    """The attributes field of every whole batch in a segment file."""
    data = log_file.read_bytes()
    return [struct.unpack_from(">h", data, pos + 21)[0] for pos, _, _ in batch_positions(log_file)]


def file_size(path: Path) -> int:
    return os.stat(path).st_size
