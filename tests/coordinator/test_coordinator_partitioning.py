"""group_partition: Java String.hashCode and Kafka's Utils.abs, by hand-computed vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.coordinator import group_partition, java_string_hashcode, kafka_abs

INT_MIN = -(2**31)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),  # 3105
        ("hello", 99162322),  # Java's well-known "hello".hashCode()
        ("Aa", 2112),  # 65*31 + 97
        ("BB", 2112),  # 66*31 + 66: the textbook collision with "Aa"
        ("é", 0xE9),  # one UTF-16 unit: 233
        ("日本", 0x65E5 * 31 + 0x672C),  # 26085*31 + 26412 = 835047
        # Outside the BMP Java hashes the surrogate pair D83D DE00, not the code point.
        ("😀", 0xD83D * 31 + 0xDE00),  # 1772899
        # Overflows int32; a well-known value, negative.
        ("Hello World", -862545276),
        # The famous string whose hashCode is Integer.MIN_VALUE.
        ("polygenelubricants", INT_MIN),
    ],
)
def test_java_string_hashcode(text, expected):
    assert java_string_hashcode(text) == expected


def test_kafka_abs_is_a_sign_mask():
    assert kafka_abs(5) == 5
    assert kafka_abs(-1) == 2**31 - 1  # not 1: Utils.abs masks, it does not negate
    assert kafka_abs(-862545276) == 2**31 - 862545276
    # Math.abs(Integer.MIN_VALUE) stays negative in Java; Kafka's Utils.abs gives 0.
    assert kafka_abs(INT_MIN) == 0


def test_group_partition_vectors():
    assert group_partition("hello", 50) == 99162322 % 50 == 22
    # 2^31 - 862545276 = 1284938372, and 1284938372 % 50 = 22.
    assert group_partition("Hello World", 50) == 22
    assert group_partition("polygenelubricants", 50) == 0
    assert group_partition("polygenelubricants", 7) == 0
    assert group_partition("日本", 50) == 835047 % 50 == 47
    assert group_partition("anything", 1) == 0


def test_group_partition_rejects_no_partitions():
    with pytest.raises(ValueError):
        group_partition("g", 0)


def _reference_hash(text: str) -> int:
    # Independent formulation: signed int32 arithmetic at every step.
    h = 0
    data = text.encode("utf-16-le", "surrogatepass")
    for unit in (int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)):
        h = (h * 31 + unit + 2**31) % 2**32 - 2**31
    return h


@given(st.text(), st.integers(min_value=1, max_value=1000))
def test_group_partition_matches_reference(text, partitions):
    expected_hash = _reference_hash(text)
    assert java_string_hashcode(text) == expected_hash
    assert group_partition(text, partitions) == (expected_hash & 0x7FFFFFFF) % partitions
