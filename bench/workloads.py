"""The client side of the benchmark: topic setup, produce and consume runs (confluent-kafka).

Client code is kept lean so the broker, not the client, is what gets measured: one payload
object reused for every message, `produce()` in a tight loop with `poll(0)` every
POLL_EVERY messages, BufferError answered by a short poll, delivery callbacks only on a
sample of messages (their `Message.latency()` is librdkafka's own produce-to-ack time, so
it does not depend on when the callback happens to be served).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MIB = 1 << 20
POLL_EVERY = 1000
STALL_SECONDS = 60.0  # a producer queue that stays full this long means the broker is stuck


def payload(size: int) -> bytes:
    """Incompressible message value, built once and reused for every message."""
    return os.urandom(size)


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(pct / 100.0 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


@dataclass
class Latencies:
    """Produce-to-acknowledgement times in seconds (librdkafka's Message.latency())."""

    values: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            self.first_error = self.first_error or str(err)
            return
        latency = msg.latency()
        if latency is not None:
            self.values.append(latency)

    def summary_ms(self) -> dict[str, float | int]:
        ordered = sorted(self.values)
        return {
            "samples": len(ordered),
            "p50_ms": percentile(ordered, 50) * 1000,
            "p99_ms": percentile(ordered, 99) * 1000,
            "max_ms": (ordered[-1] if ordered else float("nan")) * 1000,
            "mean_ms": (statistics.fmean(ordered) if ordered else float("nan")) * 1000,
        }


class ClientErrors:
    """error_cb for librdkafka's global errors (connection failures and the like)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, err: KafkaError) -> None:
        self.errors.append(str(err))


# -- topics -------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> str:
    """Create a 1-partition topic; returns how ("CreateTopics" or "auto-create").

    Uses the CreateTopics API when the broker offers it, otherwise the broker's
    auto.create.topics.enable through a producer's metadata request; either way waits until
    the topic has exactly one partition with a leader.
    """
    # log_level 4: a broker without CreateTopics closes the connection, an expected info line
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    how = "CreateTopics"
    try:
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=1)],
            request_timeout=timeout,
            operation_timeout=timeout,
        )
        futures[topic].result(timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        code = error.code() if isinstance(error, KafkaError) else None
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            raise RuntimeError(f"topic {topic} already exists; a run needs new topics") from exc
        how = "auto-create"
        producer = Producer(
            {"bootstrap.servers": bootstrap, "allow.auto.create.topics": True, "log_level": 4}
        )
        producer.list_topics(topic, timeout=timeout)
    _wait_for_leader(admin, topic, timeout)
    return how


def _wait_for_leader(admin: AdminClient, topic: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            if len(meta.partitions) != 1:
                raise RuntimeError(f"topic {topic} has {len(meta.partitions)} partitions, not 1")
            if meta.partitions[0].leader >= 0:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready: {meta and meta.error}")
        time.sleep(0.05)


def high_watermark(bootstrap: str, topic: str, timeout: float = 30.0) -> tuple[int, int]:
    """(log start offset, high watermark) of partition 0, from ListOffsets."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kafkalite-bench", "enable.auto.commit": False}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
    finally:
        consumer.close()


# -- produce ------------------------------------------------------------------------------


def producer_config(bootstrap: str, acks: str, linger_ms: float) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": linger_ms,
        "batch.size": 1_000_000,  # under the broker's default message.max.bytes (1048588)
        "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 64 * 1024,
        "compression.type": "none",
        "enable.idempotence": False,
        "socket.send.buffer.bytes": 4 * MIB,
        "socket.receive.buffer.bytes": 1 * MIB,
        "message.timeout.ms": 120_000,
    }


@dataclass
class Throughput:
    messages: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MIB / self.seconds

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds


@dataclass
class ProduceResult(Throughput):
    latency: Latencies
    client_errors: list[str]


def produce_throughput(
    bootstrap: str,
    topic: str,
    messages: int,
    size: int,
    acks: str,
    linger_ms: float = 5,
    sample_every: int = 100,
    partition: int | None = 0,  # None: the client's partitioner spreads the messages
) -> ProduceResult:
    """As fast as possible, timed from the first produce() to the end of the final flush()."""
    errors = ClientErrors()
    producer = Producer({**producer_config(bootstrap, acks, linger_ms), "error_cb": errors})
    # Connect and fetch metadata before the clock starts.
    producer.list_topics(topic, timeout=30)
    value = payload(size)
    where = {} if partition is None else {"partition": partition}
    latency = Latencies()
    sampled = latency.on_delivery
    produce, poll = producer.produce, producer.poll

    start = time.perf_counter()
    for i in range(messages):
        callback = sampled if i % sample_every == 0 else None
        full_since = None
        while True:
            try:
                produce(topic, value, on_delivery=callback, **where)
                break
            except BufferError:
                now = time.perf_counter()
                full_since = full_since or now
                if now - full_since > STALL_SECONDS:
                    raise RuntimeError(
                        f"producer queue full for {STALL_SECONDS:g}s after {i} messages: "
                        f"the broker stopped acknowledging ({errors.errors[-3:]})"
                    ) from None
                poll(0.001)
        if i % POLL_EVERY == 0:
            poll(0)
    remaining = producer.flush(120)
    seconds = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} messages still undelivered after flush")
    return ProduceResult(messages, messages * size, seconds, latency, errors.errors)


def produce_latency(
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float,
    size: int,
    acks: str,
    linger_ms: float = 5,
    partition: int | None = 0,  # None: the client's partitioner spreads the messages
) -> tuple[Latencies, float]:
    """Fixed-rate produce, every message timed; returns (latencies, achieved msg/s)."""
    errors = ClientErrors()
    producer = Producer({**producer_config(bootstrap, acks, linger_ms), "error_cb": errors})
    producer.list_topics(topic, timeout=30)
    value = payload(size)
    where = {} if partition is None else {"partition": partition}
    latency = Latencies()
    count = max(1, int(rate * seconds))
    interval = 1.0 / rate
    start = time.perf_counter()
    for i in range(count):
        due = start + i * interval
        while (wait := due - time.perf_counter()) > 0:
            producer.poll(wait)
        producer.produce(topic, value, on_delivery=latency.on_delivery, **where)
        producer.poll(0)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} messages still undelivered after flush")
    return latency, count / elapsed


@dataclass
class TransactionalResult(Throughput):
    transactions: int
    commit_ms: dict[str, float | int]  # EndTxn round trips (records already acknowledged)


def produce_transactions(
    bootstrap: str,
    topic: str,
    transactions: int,
    per_transaction: int,
    size: int,
    linger_ms: float = 5,
) -> TransactionalResult:
    """Transactions of `per_transaction` records each, back to back, timed from the first
    begin_transaction() to the last commit. Each commit is timed on its own after a flush(),
    so it measures EndTxn (the coordinator's PrepareCommit, markers as the broker writes
    them) rather than the records still in flight."""
    errors = ClientErrors()
    config = producer_config(bootstrap, "all", linger_ms)
    config.update(
        {"enable.idempotence": True, "transactional.id": f"{topic}-txn", "error_cb": errors}
    )
    config.pop("batch.num.messages")  # idempotence caps in-flight batches; keep the default
    config["message.timeout.ms"] = 60_000  # librdkafka: at most transaction.timeout.ms
    producer = Producer(config)
    producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)
    value = payload(size)
    commits: list[float] = []
    start = time.perf_counter()
    for _ in range(transactions):
        producer.begin_transaction()
        for i in range(per_transaction):
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.001)
            if i % POLL_EVERY == 0:
                producer.poll(0)
        if producer.flush(120):
            raise RuntimeError("records still undelivered after flush")
        committing = time.perf_counter()
        producer.commit_transaction(60)
        commits.append((time.perf_counter() - committing) * 1000)
    seconds = time.perf_counter() - start
    messages = transactions * per_transaction
    commits.sort()
    commit_ms = {
        "p50_ms": percentile(commits, 50),
        "p99_ms": percentile(commits, 99),
        "max_ms": commits[-1],
        "samples": len(commits),
    }
    return TransactionalResult(messages, messages * size, seconds, transactions, commit_ms)


# -- consume ------------------------------------------------------------------------------


def consumer_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "kafkalite-bench",  # required by the client; nothing is committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "fetch.max.bytes": 50 * MIB,
        "max.partition.fetch.bytes": 10 * MIB,
        "receive.message.max.bytes": 50 * MIB + MIB,
        "fetch.wait.max.ms": 100,
        "fetch.min.bytes": 1,
        "queued.max.messages.kbytes": 256 * 1024,
        "queued.min.messages": 1_000_000,
        "socket.receive.buffer.bytes": 4 * MIB,
        "check.crcs": False,
    }


@dataclass
class ConsumeResult(Throughput):
    first_message_s: float
    client_errors: list[str]


def consume_all(
    bootstrap: str, topic: str, expected: int, batch: int = 10_000, timeout: float = 60.0
) -> ConsumeResult:
    """Read partition 0 from offset 0 until `expected` messages; timed from assign()."""
    errors = ClientErrors()
    consumer = Consumer({**consumer_config(bootstrap), "error_cb": errors})
    try:
        consumer.list_topics(topic, timeout=30)  # connect before the clock starts
        consume = consumer.consume
        count = nbytes = 0
        first: float | None = None
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        idle_deadline = start + timeout
        while count < expected:
            msgs = consume(num_messages=batch, timeout=1.0)
            if not msgs:
                if time.perf_counter() > idle_deadline:
                    raise RuntimeError(
                        f"consumed {count} of {expected} messages, then nothing for {timeout}s"
                    )
                continue
            if first is None:
                first = time.perf_counter() - start
            for msg in msgs:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                nbytes += len(msg)
            count += len(msgs)
            idle_deadline = time.perf_counter() + timeout
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    return ConsumeResult(count, nbytes, seconds, first or 0.0, errors.errors)
