"""Share group consumption (KIP-932): records/s with 1..N confluent-kafka ShareConsumers on
one partition, implicit acknowledgement (every record ACCEPTed), against a kafkalite broker
process (or any broker with --bootstrap).

    .venv/bin/python -m bench.share_bench [--messages 50000] [--consumers 1,4] [--size 100]
        [--bootstrap HOST:PORT]

A warm-up record is consumed first (the share-partition starts at the end of the log, as
Kafka's share.auto.offset.reset=latest), then --messages are produced while the consumers
read: the clock runs from the first record produced to the last one received. It prints
figures; it is not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    payload = b"x" * size
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=payload)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)


def run(bootstrap: str, consumers: int, messages: int, size: int) -> float:
    """Records/s for `consumers` share consumers on one partition."""
    topic, group = f"share-bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    members = [
        ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(consumers)
    ]
    for member in members:
        member.subscribe([topic])
    received = [0] * consumers
    offsets: list[list[int]] = [[] for _ in range(consumers)]
    stop = threading.Event()
    warm = threading.Event()

    def consume(index: int) -> None:
        while not stop.is_set():
            for message in members[index].poll(0.2):
                if message.error() is None:
                    if message.value() == b"warm-up":
                        warm.set()
                    else:
                        received[index] += 1
                        offsets[index].append(message.offset())

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while not warm.is_set():
        warm_up = Producer({"bootstrap.servers": bootstrap})
        warm_up.produce(topic, value=b"warm-up")
        warm_up.flush(10)
        warm.wait(2)
        if time.monotonic() > deadline:
            raise RuntimeError("the share consumers never received the warm-up record")
    started = time.monotonic()
    _produce(bootstrap, topic, messages, size)
    while sum(received) < messages:
        if time.monotonic() - started > 300:
            raise RuntimeError(f"only {sum(received)} of {messages} received")
        time.sleep(0.01)
    elapsed = time.monotonic() - started
    stop.set()
    for thread in threads:
        thread.join()
    for member in members:
        member.close()
    delivered = [offset for each in offsets for offset in each]
    duplicates = len(delivered) - len(set(delivered))
    print(
        f"{consumers} consumer(s): {messages / elapsed:,.0f} records/s "
        f"(split {received}, {duplicates} delivered twice)"
    )
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--consumers", default="1,4")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    if args.bootstrap:
        for count in counts:
            run(args.bootstrap, count, args.messages, args.size)
        return
    with tempfile.TemporaryDirectory() as data:
        broker = BrokerProcess(Path(data), {"num.partitions": "1"}).start()
        try:
            for count in counts:
                run(broker.bootstrap, count, args.messages, args.size)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
