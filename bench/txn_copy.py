"""A consume-transform-produce loop on a cluster: Kafka's TransactionalMessageCopier, or the
same loop written with confluent-kafka.

`fill(bootstrap, topic, records)` writes the input (1 partition, 100-byte values, acks=all).

`java_copier(...)` runs org.apache.kafka.tools.TransactionalMessageCopier from the kafka-tools
jars compat/kafka_tools.py caches (Maven Central): a read_committed consumer assigned to the
input partition, a transactional producer (batch.size 512, 5 in flight), and per poll of up to
`--transaction-size` records: beginTransaction, send every record, sendOffsetsToTransaction,
commitTransaction. It prints a JSON status line per loop ("ProcessLoop", with the JVM's wall
clock to the millisecond) and one at exit ("shutdown_complete"); the rate is taken between the
first ProcessLoop line and the shutdown line, so JVM start and initTransactions are left out.

`python_copier(...)` is the same loop with librdkafka, timed step by step so a slow loop says
where its time goes: produce() of the batch, flush() (AddPartitionsToTxn and the acks=all
produce), send_offsets_to_transaction() (AddOffsetsToTxn and TxnOffsetCommit), and
commit_transaction() (EndTxn: the coordinator's PrepareCommit, the markers, CompleteCommit as
far as the broker waits for them). The flush before the offsets serialises what the Java
client overlaps; the sum of the steps is what one transaction costs.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.workloads import Latencies

COPIER_CLASS = "org.apache.kafka.tools.TransactionalMessageCopier"
RECORDS_PER_TRANSACTION = 200
VALUE_SIZE = 100
COPY_TIMEOUT_S = 900.0


@dataclass
class CopyResult:
    copier: str
    records: int
    seconds: float
    transactions: int
    per_transaction: Latencies  # one loop iteration that committed a transaction
    steps: dict[str, Latencies] = field(default_factory=dict)  # the Python loop's breakdown

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "copier": self.copier,
            "records": self.records,
            "seconds": self.seconds,
            "records_per_s": self.records_per_s,
            "transactions": self.transactions,
            "per_transaction": self.per_transaction.summary_ms(),
            "steps": {name: steps.summary_ms() for name, steps in self.steps.items()},
        }


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = b"v" * VALUE_SIZE
    for number in range(records):
        while True:
            try:
                producer.produce(topic, value, str(number).encode(), partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"the input of {topic} was not all acknowledged")


# -- Kafka's TransactionalMessageCopier --------------------------------------------------------


def java_copier_command(
    bootstrap: str, source: str, target: str, records: int, transactional_id: str, group: str
) -> list[str]:
    from compat.kafka_dist import java_executable
    from compat.kafka_tools import tools_lib

    return [
        java_executable(),
        "-Xmx256m",
        "-cp",
        f"{tools_lib()}/*",
        COPIER_CLASS,
        "--broker-list", bootstrap,
        "--input-topic", source,
        "--input-partition", "0",
        "--output-topic", target,
        "--max-messages", str(records),
        "--transactional-id", transactional_id,
        "--consumer-group", group,
        "--transaction-size", str(RECORDS_PER_TRANSACTION),
    ]  # fmt: skip


def _jvm_time(status: dict[str, Any]) -> float:
    stamp = datetime.datetime.strptime(status["time"], "%Y/%m/%d %H:%M:%S:%f")
    return stamp.timestamp()


def java_copier(bootstrap: str, source: str, target: str, records: int) -> CopyResult:
    run = uuid.uuid4().hex[:8]
    cmd = java_copier_command(bootstrap, source, target, records, f"copier-{run}", f"copy-{run}")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=COPY_TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError(
            f"TransactionalMessageCopier exited {result.returncode}: "
            f"{(result.stderr or result.stdout)[-2000:]}"
        )
    return java_copier_result(result.stdout, records)


def java_copier_result(stdout: str, records: int) -> CopyResult:
    """The copier's figures from its status lines (one per loop, one at exit)."""
    statuses = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    loops = [s for s in statuses if s.get("stage") == "ProcessLoop"]
    # Kafka 4.3 marks the exit line with stage ShutdownComplete, earlier versions with a key.
    done = [s for s in statuses if s.get("stage") == "ShutdownComplete" or "shutdown_complete" in s]
    if not loops or not done:
        raise RuntimeError(f"TransactionalMessageCopier printed no progress: {stdout[-2000:]}")
    copied = int(done[-1]["totalProcessed"])
    if copied != records:
        raise RuntimeError(f"TransactionalMessageCopier copied {copied} of {records} records")
    per_transaction = Latencies()
    for before, after in zip(loops, [*loops[1:], done[-1]], strict=True):
        if after["totalProcessed"] > before["totalProcessed"]:
            per_transaction.values.append(_jvm_time(after) - _jvm_time(before))
    seconds = _jvm_time(done[-1]) - _jvm_time(loops[0])
    return CopyResult("java", copied, seconds, len(per_transaction.values), per_transaction)


# -- the same loop with confluent-kafka ----------------------------------------------------------


def python_copier(bootstrap: str, source: str, target: str, records: int) -> CopyResult:
    run = uuid.uuid4().hex[:8]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"copy-{run}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"copier-{run}", "linger.ms": 5}
    )
    steps = {name: Latencies() for name in ("produce", "flush", "send_offsets", "commit")}
    per_transaction = Latencies()
    try:
        consumer.assign([TopicPartition(source, 0, 0)])
        producer.init_transactions(60)
        copied, started = 0, time.monotonic()
        while copied < records:
            batch = consumer.consume(min(RECORDS_PER_TRANSACTION, records - copied), 0.2)
            batch = [m for m in batch if m.error() is None]
            if batch:
                copy_batch(producer, consumer, batch, target, steps)
                per_transaction.values.append(sum(s.values[-1] for s in steps.values()))
                copied += len(batch)
        seconds = time.monotonic() - started
    finally:
        producer.flush(30)
        consumer.close()
    return CopyResult(
        "python", copied, seconds, len(per_transaction.values), per_transaction, steps
    )


def copy_batch(
    producer: Producer,
    consumer: Consumer,
    batch: list[Any],
    target: str,
    steps: dict[str, Latencies],
) -> None:
    clock = time.monotonic()

    def step(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        steps[name].values.append(now - clock)
        clock = now

    producer.begin_transaction()
    for message in batch:
        producer.produce(target, message.value(), message.key(), partition=0)
    step("produce")
    if producer.flush(60):
        raise RuntimeError("transactional records still undelivered after flush")
    step("flush")
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
    step("send_offsets")
    producer.commit_transaction(60)
    step("commit")
