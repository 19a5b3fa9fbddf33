"""Compressed batches built as the Java client writes them (every codec): stored and
fetched intact, and ListOffsets by timestamp finds records inside them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol_tests.batches import CODECS, Record, build_batch, decode_batches
from protocol_tests.raw_client import (
    RawClient,
    fetch_request,
    list_offsets_request,
    produce_request,
)

NONE = 0
MAX_TIMESTAMP = -3
BASE = 1_700_000_000_000


@pytest.mark.parametrize("codec", list(CODECS))
def test_compressed_batch_round_trip_and_timestamp_lookup(
    client: RawClient, new_topic: Callable[..., tuple[str, object]], codec: str
) -> None:
    topic, _ = new_topic()
    stamps = [BASE + 10 * i for i in range(20)]
    stamps[7] = BASE + 10_000  # the maximum, mid-batch
    records = [
        Record(b"k%d" % i, b"value %d " % i * 30, (("i", b"%d" % i),), ts)
        for i, ts in enumerate(stamps)
    ]
    plain = build_batch(records[:5])
    batch = build_batch(records[5:], compression=CODECS[codec])
    for payload, base in ((plain, 0), (batch, 5)):
        response = client.request(produce_request(topic, 0, payload))
        part = response.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (NONE, base)

    fetched = client.request(fetch_request(topic, 0, 0)).responses[0].partitions[0]
    batches = decode_batches(fetched.records)
    assert [b.attributes & 0x07 for b in batches] == [0, CODECS[codec]]
    got = [r for b in batches for r in b.records]
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (i, r.key, r.value, r.timestamp, list(r.headers)) for i, r in enumerate(records)
    ]

    def lookup(timestamp: int) -> tuple[int, int]:
        response = client.request(list_offsets_request(topic, 0, timestamp))
        (part,) = response.topics[0].partitions
        assert part.error_code == NONE
        return part.offset, part.timestamp

    assert lookup(BASE + 31) == (4, BASE + 40)  # in the plain batch
    assert lookup(BASE + 51) == (6, BASE + 60)  # inside the compressed batch
    assert lookup(BASE + 61) == (7, BASE + 10_000)  # the first record >= target, by offset
    assert lookup(BASE + 10_001) == (-1, -1)
    assert lookup(MAX_TIMESTAMP) == (7, BASE + 10_000)
