"""metrics.topic_traffic.record_count reads batch headers only, and never trusts their lengths."""

from __future__ import annotations

import struct

import pytest

from kafkalite.metrics.topic_traffic import record_count
from protocol_tests.batches import simple_batch


def test_counts_the_records_of_every_batch() -> None:
    assert record_count(simple_batch(3) + simple_batch(4)) == 7


@pytest.mark.parametrize("length", [-12, -1_000_000, 0, 48])
def test_a_batch_length_that_cannot_be_stops_the_count(length: int) -> None:
    batch = bytearray(simple_batch(3))
    struct.pack_into(">i", batch, 8, length)
    assert record_count(bytes(batch) + simple_batch(2)) == 0
