"""The dead-letter records of KIP-1191 (broker/share_dead_letters.py), without a broker:
Kafka's six headers in its order, and the source's key and value only when copied."""

from __future__ import annotations

from kafkalite.broker.share_dead_letters import DeadLetterSource, dead_letter_records
from kafkalite.share.share_partition import CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED, DeadLetter
from kafkalite.storage.records import Record

SOURCE = DeadLetterSource("workers", "orders", 3)


def test_each_dead_letter_carries_kafkas_headers() -> None:
    dead = [DeadLetter(10, 1, CLIENT_REJECT), DeadLetter(12, 5, DELIVERY_COUNT_EXCEEDED)]
    records = dead_letter_records(SOURCE, dead, {}, now_ms=1234)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (0, 1234, None, None),
        (1, 1234, None, None),
    ]
    assert records[1].headers == (
        ("__dlq.errors.topic", b"orders"),
        ("__dlq.errors.partition", b"3"),
        ("__dlq.errors.offset", b"12"),
        ("__dlq.errors.group", b"workers"),
        ("__dlq.errors.delivery.count", b"5"),
        ("__dlq.errors.message", b"Offset delivery count exceeded the threshold."),
    )


def test_a_copied_record_keeps_its_key_and_value_not_its_headers() -> None:
    original = Record(10, 1, b"k", b"v", (("trace", b"1"),))
    [record] = dead_letter_records(SOURCE, [DeadLetter(10, 1, CLIENT_REJECT)], {10: original}, 9)
    assert (record.key, record.value) == (b"k", b"v")
    assert [name for name, _ in record.headers] == [
        "__dlq.errors.topic",
        "__dlq.errors.partition",
        "__dlq.errors.offset",
        "__dlq.errors.group",
        "__dlq.errors.delivery.count",
        "__dlq.errors.message",
    ]
