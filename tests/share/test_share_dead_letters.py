"""The dead-letter records of KIP-1191 (share/dead_letter_records.py), without a broker:
Kafka's six headers in its order, and the source's key and value only when copied."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.share.dead_letter_records import (
    DeadLetterSource,
    dead_letter_records,
    encode_rounds,
    source_offsets,
)
from kafkalite.share.share_partition import CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED, DeadLetter
from kafkalite.storage.batch import iter_batches
from kafkalite.storage.records import Record, decode_records

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


def test_dead_letters_beyond_max_message_bytes_go_in_several_batches() -> None:
    contents = {o: Record(o, 1, b"k", bytes(300), ()) for o in range(10)}
    dead = [DeadLetter(o, 1, CLIENT_REJECT) for o in range(10)]
    records = dead_letter_records(SOURCE, dead, contents, now_ms=5)
    data = encode_rounds(records, 1100, now_ms=5)  # two records a batch
    batches = [(position, header) for position, header in iter_batches(data)]
    assert len(batches) == 5
    assert all(header.size <= 1100 for _, header in batches)
    decoded = [r for p, h in batches for r in decode_records(data[p : p + h.size])]
    offsets = [dict(r.headers)["__dlq.errors.offset"] for r in decoded]
    assert offsets == [str(o).encode() for o in range(10)]
    assert sum(len(data[p : p + h.size]) for p, h in batches) == len(data)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=20),
    limit=st.integers(200, 5000),
    key=st.none() | st.binary(max_size=200),
)
def test_every_batch_of_several_records_fits(
    sizes: list[int], limit: int, key: bytes | None
) -> None:
    contents = {o: Record(o, 1, key, bytes(size), ()) for o, size in enumerate(sizes)}
    dead = [DeadLetter(o, 7, DELIVERY_COUNT_EXCEEDED) for o in range(len(sizes))]
    data = encode_rounds(dead_letter_records(SOURCE, dead, contents, 5), limit, now_ms=5)
    batches = list(iter_batches(data))
    assert sum(header.records_count for _, header in batches) == len(sizes)
    assert all(h.size <= limit or h.records_count == 1 for _, h in batches)


def test_the_offsets_dead_letters_stand_for_are_read_back_for_their_source_only() -> None:
    dead = [DeadLetter(3, 1, CLIENT_REJECT), DeadLetter(9, 2, DELIVERY_COUNT_EXCEEDED)]
    records = dead_letter_records(SOURCE, dead, {}, now_ms=1)
    other = dead_letter_records(DeadLetterSource("other", "orders", 3), dead[:1], {}, now_ms=1)
    assert source_offsets(SOURCE, [*records, *other]) == {3, 9}
