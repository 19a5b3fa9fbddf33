"""storage/record_filter.py: a view's read keeps the matching records at their offsets, in
valid batches (CRC, codec), keeps control batches, and leaves empty batches over the rest."""

from __future__ import annotations

import pytest
from batches import GZIP, LZ4, NONE, SNAPPY, SNAPPY_RAW, ZSTD, Record, make_batch
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.storage.batch import BatchHeader, compute_crc, iter_batches
from kafkalite.storage.record_filter import (
    FilterStats,
    HeaderValues,
    filter_batches,
    predicate_matcher,
)
from kafkalite.storage.records import decode_records

_eu = predicate_matcher(
    lambda key, headers: headers.get(b"region") == b"eu", frozenset({b"region"})
)


def _records(regions: list[str]) -> list[Record]:
    return [
        Record(key=f"k{i}".encode(), value=f"v{i}".encode(), headers=(("region", r.encode()),))
        for i, r in enumerate(regions)
    ]


def validate_batches(data: bytes, _max: int) -> list[BatchHeader]:
    """Every batch's header, its framing and CRC checked (the counts may leave gaps)."""
    headers, end = [], 0
    for pos, header in iter_batches(data):
        assert compute_crc(data[pos : pos + header.size]) == header.crc
        headers.append(header)
        end = pos + header.size
    assert end == len(data)
    return headers


def _kept(data: bytes) -> list[tuple[int, bytes | None]]:
    out = []
    for pos, header in iter_batches(data):
        if not header.is_control:
            out += [(r.offset, r.key) for r in decode_records(data[pos : pos + header.size])]
    return out


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, SNAPPY_RAW, LZ4, ZSTD])
def test_a_partly_matching_batch_is_reencoded_with_its_codec_and_offsets(codec: int) -> None:
    batch = make_batch(
        _records(["eu", "us", "eu", "us"]),
        base_offset=100,
        compression=codec,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        leader_epoch=3,
    )
    out = filter_batches(batch, _eu)
    (header,) = validate_batches(out, len(out))  # framing and CRC are right
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (100, 3, 2)
    assert header.compression == (SNAPPY if codec == SNAPPY_RAW else codec)
    assert (header.producer_id, header.producer_epoch, header.partition_leader_epoch) == (7, 1, 3)
    assert _kept(out) == [(100, b"k0"), (102, b"k2")]
    assert [r.headers for r in decode_records(out)] == [(("region", b"eu"),)] * 2


def test_a_fully_matching_batch_is_sent_as_stored() -> None:
    batch = make_batch(_records(["eu", "eu"]), base_offset=5, compression=LZ4)
    assert filter_batches(batch, _eu) == batch


def test_a_batch_with_no_match_becomes_an_empty_batch_over_its_offsets() -> None:
    batch = make_batch(_records(["us"] * 50), base_offset=10, compression=ZSTD, value_size=100)
    out = filter_batches(batch, _eu)
    (header,) = validate_batches(out, len(out))
    assert (header.base_offset, header.next_offset, header.records_count) == (10, 60, 0)
    assert len(out) == 61  # a bare header: the consumer advances to 60 and no further bytes


def test_control_batches_are_kept_and_transactional_flags_survive() -> None:
    data = make_batch(
        _records(["us", "eu"]), base_offset=0, producer_id=3, producer_epoch=0, transactional=True
    ) + make_batch(
        [Record(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")],
        base_offset=2,
        producer_id=3,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    out = filter_batches(data, _eu)
    first, marker = validate_batches(out, len(out))
    assert first.is_transactional and (first.producer_id, first.records_count) == (3, 1)
    assert marker.is_control and out.endswith(data[-marker.size :])
    assert _kept(out) == [(1, b"k1")]


def test_log_append_time_batches_keep_their_timestamps() -> None:
    batch = make_batch(_records(["eu", "us"]), base_timestamp=1_000, log_append_time=True)
    out = filter_batches(batch, _eu)
    (header,) = validate_batches(out, len(out))
    source = validate_batches(batch, len(batch))[0]
    assert header.attributes == source.attributes
    assert header.max_timestamp == source.max_timestamp
    assert [r.timestamp for r in decode_records(out)] == [source.max_timestamp]


def test_the_key_reaches_the_predicate_and_stats_count() -> None:
    data = make_batch(_records(["a", "b", "c"])) + make_batch(_records(["d"]), base_offset=3)
    stats = FilterStats()
    out = filter_batches(data, predicate_matcher(lambda key, h: key == b"k0", frozenset()), stats)
    assert _kept(out) == [(0, b"k0"), (3, b"k0")]
    assert (stats.records_read, stats.records_matched) == (4, 2)
    assert (stats.bytes_in, stats.bytes_out) == (len(data), len(out))
    assert filter_batches(b"", _eu) == b""


def test_only_the_named_headers_reach_the_matcher_and_the_last_of_a_name_wins() -> None:
    seen: list[HeaderValues] = []

    def keep(key: bytes | None, headers: HeaderValues) -> bool:
        seen.append(headers)
        return True

    record = Record(headers=(("a", b"1"), ("b", b"2"), ("a", b"3"), ("c", None)))
    batch = make_batch([record, Record()])
    assert filter_batches(batch, predicate_matcher(keep, frozenset({b"a", b"c"}))) == batch
    assert seen == [{b"a": b"3", b"c": None}, {}]


def test_a_view_filter_is_a_matcher() -> None:
    from kafkalite.broker.view_filter import parse

    data = make_batch(_records(["eu", "us", "eu"]), compression=GZIP)
    assert _kept(filter_batches(data, parse("region <> 'eu' OR __key = 'k2'"))) == [
        (1, b"k1"),
        (2, b"k2"),
    ]


# -- against an oracle -------------------------------------------------------------------------

_VALUES = st.one_of(st.none(), st.sampled_from([b"eu", b"us", b"1", b"10", b"", b"\xff"]))
_RECORDS = st.lists(
    st.builds(
        Record,
        key=st.one_of(st.none(), st.sampled_from([b"k1", b"k2", b"x" * 200])),
        value=st.one_of(st.none(), st.binary(max_size=150)),
        headers=st.lists(
            st.tuples(st.sampled_from(["region", "n", "other"]), _VALUES), max_size=4
        ).map(tuple),
    ),
    min_size=1,
    max_size=12,
)
_CODECS = st.sampled_from([NONE, GZIP, LZ4, ZSTD])
_FILTERS = st.sampled_from(
    [
        "region = 'eu'",
        "region <> 'eu' OR n > 5",
        "n BETWEEN 1 AND 10 AND __key IS NOT NULL",
        "region IS NULL",
        "NOT region IN ('us')",
        "__key = 'k1'",
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_RECORDS, st.sampled_from([NONE, GZIP, LZ4, ZSTD])), max_size=5), _FILTERS
)
def test_filtering_keeps_exactly_what_the_filter_accepts(
    batches: list[tuple[list[Record], int]], text: str
) -> None:
    from kafkalite.broker.view_filter import parse

    data, offset = b"", 0
    for records, codec in batches:
        data += make_batch(records, base_offset=offset, compression=codec)
        offset += len(records)
    f = parse(text)
    out = filter_batches(data, f)
    decoded = [r for pos, h in iter_batches(data) for r in decode_records(data[pos : pos + h.size])]
    expected = [
        (r.offset, r.key, r.value, r.headers) for r in decoded if f.matches(r.key, r.headers)
    ]
    got = [(r.offset, r.key, r.value, r.headers) for r in decode_records_all(out)]
    assert got == expected
    headers = validate_batches(out, len(out))
    assert [h.base_offset for h in headers] == [h.base_offset for _, h in iter_batches(data)]
    assert [h.next_offset for h in headers] == [h.next_offset for _, h in iter_batches(data)]


def decode_records_all(data: bytes) -> list:
    return [r for pos, h in iter_batches(data) for r in decode_records(data[pos : pos + h.size])]
