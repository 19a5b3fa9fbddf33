"""Retry topics (issue 17): a topic with `kafkalite.retry.target` set takes the records a
consumer failed to process and moves each, after its backoff, back to the target topic with
its attempt number one higher, or, once `kafkalite.retry.max.attempts` are spent, to the
dead-letter topic. The delay store of the retry topic's partition holds them meanwhile
(broker/delayed_delivery_store.py), so each moves exactly once. Sans-IO.

The attempt number is the header `kafkalite-retry-attempt` (ASCII decimal; none means 0).
A record goes to the target's partition its key gives under Kafka's default partitioner
(murmur2, as the Java client), a keyless one to the retry partition's index modulo the
target's partition count. In the dead-letter topic a record carries KIP-1191's
`__dlq.errors.topic` and `__dlq.errors.partition` naming the retry topic and partition it was
produced to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kafkalite.broker.topic_config import effective_value
from kafkalite.config import BrokerConfig
from kafkalite.share.dead_letter_records import HEADER_PARTITION, HEADER_TOPIC  # KIP-1191's
from kafkalite.storage.errors import InvalidRecordError, RecordError
from kafkalite.storage.records import Record

ATTEMPT_HEADER = "kafkalite-retry-attempt"

TARGET_CONFIG = "kafkalite.retry.target"
BACKOFF_CONFIG = "kafkalite.retry.backoff.ms"
MAX_ATTEMPTS_CONFIG = "kafkalite.retry.max.attempts"
DEAD_LETTER_CONFIG = "kafkalite.retry.dead.letter.topic"


@dataclass(frozen=True, slots=True)
class RetrySettings:
    target: str
    backoff_ms: tuple[int, ...]
    max_attempts: int
    dead_letter: str

    def backoff(self, attempt: int) -> int:
        return self.backoff_ms[min(attempt, len(self.backoff_ms) - 1)]


def retry_settings(broker: BrokerConfig, overrides: Mapping[str, str]) -> RetrySettings | None:
    """The topic's retry settings; None when it is not a retry topic."""

    def value(name: str) -> str:
        return effective_value(broker, overrides, name)[0]

    target = value(TARGET_CONFIG)
    if not target:
        return None
    return RetrySettings(
        target,
        tuple(int(part) for part in value(BACKOFF_CONFIG).split(",")),  # validated
        int(value(MAX_ATTEMPTS_CONFIG)),
        value(DEAD_LETTER_CONFIG),
    )


def attempt_of(record: Record) -> int:
    """The record's attempt number; raises ValueError for a malformed header."""
    found = [value for key, value in record.headers if key == ATTEMPT_HEADER]
    if not found:
        return 0
    value = found[-1]
    if not value or not value.isascii() or not value.isdigit():
        shown = value.decode("ascii", "replace") if value is not None else "null"
        raise ValueError(f"header {ATTEMPT_HEADER} must be an ASCII decimal, got '{shown}'")
    return int(value)


def retry_due_times(records: Sequence[Record], settings: RetrySettings, now_ms: int) -> list[int]:
    """When each record moves: after its attempt's backoff, or at once to the dead-letter
    topic. Raises InvalidRecordError naming each record that cannot move."""
    dues, refused = [], []
    for index, record in enumerate(records):
        try:
            attempt = attempt_of(record)
        except ValueError as exc:
            refused.append(RecordError(index, str(exc)))
            continue
        if attempt < settings.max_attempts:
            dues.append(now_ms + settings.backoff(attempt))
        elif settings.dead_letter:
            dues.append(now_ms)
        else:
            message = (
                f"{ATTEMPT_HEADER} {attempt} reached {MAX_ATTEMPTS_CONFIG}="
                f"{settings.max_attempts} and the topic has no {DEAD_LETTER_CONFIG}"
            )
            refused.append(RecordError(index, message))
    if refused:
        raise InvalidRecordError.rejecting(refused)
    return dues


def route(
    record: Record,
    settings: RetrySettings,
    source: tuple[str, int],
    partition_count: Callable[[str], int | None],
) -> tuple[tuple[str, int], Record] | None:
    """Where a due record of the retry partition `source` goes, and as what; None when its
    topic is gone."""
    attempt = attempt_of(record)
    headers = tuple((k, v) for k, v in record.headers if k != ATTEMPT_HEADER)
    if attempt < settings.max_attempts:
        topic = settings.target
        headers += ((ATTEMPT_HEADER, b"%d" % (attempt + 1)),)
    else:
        topic = settings.dead_letter
        headers = tuple((k, v) for k, v in headers if k not in (HEADER_TOPIC, HEADER_PARTITION))
        headers += (
            (HEADER_TOPIC, source[0].encode()),
            (HEADER_PARTITION, b"%d" % source[1]),
            (ATTEMPT_HEADER, b"%d" % attempt),
        )
    count = partition_count(topic)
    if not count:
        return None
    if record.key is None:
        index = source[1] % count
    else:
        index = (murmur2(record.key) & 0x7FFFFFFF) % count
    moved = Record(record.offset, record.timestamp, record.key, record.value, headers)
    return (topic, index), moved


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (the Java client's default partitioner), as an unsigned 32-bit
    value."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail, rest = length - length % 4, length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h
