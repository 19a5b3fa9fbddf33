"""Which `__consumer_offsets` partition holds a group, computed exactly as Kafka does.

Kafka: `Utils.abs(groupId.hashCode()) % groupMetadataTopicPartitionCount`, where
`String.hashCode` runs over UTF-16 code units with 32-bit overflow and `Utils.abs` is
`n & 0x7fffffff` (so Integer.MIN_VALUE maps to 0, unlike `Math.abs`).
"""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF


def java_string_hashcode(value: str) -> int:
    """Java's `String.hashCode()`: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units."""
    encoded = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: clears the sign bit, so it is total on int32 (MIN_VALUE -> 0)."""
    return n & 0x7FFFFFFF


def group_partition(group_id: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
