"""A consume-transform-produce worker for the exactly-once tests (run as a process, so
tests can SIGKILL it): reads `source` from its committed offsets (read_committed), writes
each record's value upper-cased to `sink` inside a transaction with the consumed offsets
(send_offsets_to_transaction), a few records per transaction, and exits 0 once every input
record is committed.

Usage: txn_worker.py BOOTSTRAP SOURCE PARTITIONS SINK GROUP TRANSACTIONAL_ID
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT = 30.0
PER_TRANSACTION = 7


def main(bootstrap: str, source: str, partitions: int, sink: str, group: str, tid: str) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2})
    producer.init_transactions(TIMEOUT)  # fences the previous instance, aborting its work
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    tps = [TopicPartition(source, p) for p in range(partitions)]
    ends = {p: consumer.get_watermark_offsets(tp, TIMEOUT, False)[1] for p, tp in enumerate(tps)}
    consumer.assign(tps)  # from the committed offsets
    while True:
        messages = [m for m in consumer.consume(PER_TRANSACTION, 0.5) if not m.error()]
        if not messages:
            # Done when the group's committed offsets reach the ends (the position is unset
            # when a restart begins at the end).
            committed = consumer.committed(tps, TIMEOUT)
            if all(tp.offset >= ends[tp.partition] for tp in committed):
                return 0
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, message.value().upper(), key=message.key())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()),
            consumer.consumer_group_metadata(),
            TIMEOUT,
        )
        producer.commit_transaction(TIMEOUT)


if __name__ == "__main__":
    bootstrap, source, partitions, sink, group, tid = sys.argv[1:]
    sys.exit(main(bootstrap, source, int(partitions), sink, group, tid))
