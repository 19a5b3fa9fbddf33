"""Delayed delivery (issue 17): which records of a produced batch are held, until when, and
how held records and release intents are written in a partition's delay store.

A topic opts in with `kafkalite.delayed.delivery.enable=true` (its broker property of the
same name sets the default) or a `kafkalite.delivery.delay.ms` above 0. In such a topic a
record with the header `kafkalite-delay-ms` (ASCII decimal milliseconds after the broker
appends it) or `kafkalite-deliver-at` (ASCII decimal epoch milliseconds) becomes readable at
that time; a record without them waits `kafkalite.delivery.delay.ms`. The store
(broker/delayed_delivery_store.py) keeps each held batch as it was produced, right after a
record of its own giving the records' due times; release intents and their cancellations are
records of the store too, and so are the ends of transactions (a transactional producer's
held records wait for its commit). Sans-IO.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kafkalite.broker.retry_topics import RetrySettings, retry_due_times, retry_settings
from kafkalite.broker.topic_config import effective_value
from kafkalite.config import BrokerConfig
from kafkalite.storage.batch import HEADER_SIZE, NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader
from kafkalite.storage.errors import InvalidRecordError, RecordError
from kafkalite.storage.records import (
    NONE,
    Record,
    decode_records,
    decompress,
    encode_record_batch,
)

DELAY_MS_HEADER = "kafkalite-delay-ms"
DELIVER_AT_HEADER = "kafkalite-deliver-at"
# The headers of the store's own records (never seen by consumers).
STORE_KEY = b"__kafkalite.delayed"
DUES_HEADER = "__kafkalite.dues"
RELEASE_HEADER = "__kafkalite.release"
TXN_END_HEADER = "__kafkalite.txn.end"
CANCEL_HEADER = "__kafkalite.cancel"
FORWARDED_HEADER = "__kafkalite.forwarded"

ENABLE_CONFIG = "kafkalite.delayed.delivery.enable"
TOPIC_DELAY_CONFIG = "kafkalite.delivery.delay.ms"
MAX_DELAY_CONFIG = "kafkalite.delayed.delivery.max.ms"
PRECISION_CONFIG = "kafkalite.delayed.delivery.precision.ms"

_HEADER_NAMES_PREFIX = b"kafkalite-de"  # what both headers' names begin with
_INTENT = struct.Struct(">qiih")  # target offset, partition, count, topic name size
_DUES = struct.Struct(">Ii")
_OFFSET = struct.Struct(">q")
_TXN_END = struct.Struct(">q?")
_PRODUCER = struct.Struct(">qhi")  # an intent's trailer: producer id, epoch, base sequence


@dataclass(frozen=True, slots=True)
class DelaySettings:
    """A topic's delayed-delivery configs, resolved against the broker's."""

    enabled: bool
    topic_delay_ms: int
    max_delay_ms: int
    retry: RetrySettings | None = None  # a retry topic's (broker/retry_topics.py)

    @property
    def active(self) -> bool:
        """Whether produced records of the topic are looked at (decoded) at all."""
        return self.enabled or self.topic_delay_ms > 0 or self.retry is not None


def settings_for(broker: BrokerConfig, overrides: Mapping[str, str]) -> DelaySettings:
    def value(name: str) -> str:
        return effective_value(broker, overrides, name)[0]

    return DelaySettings(
        enabled=value(ENABLE_CONFIG).lower() == "true",
        topic_delay_ms=int(value(TOPIC_DELAY_CONFIG)),
        max_delay_ms=int(value(MAX_DELAY_CONFIG)),
        retry=retry_settings(broker, overrides),
    )


class _Refused(ValueError):
    """Why one record's delay is refused (its RecordError message)."""


def _decimal(name: str, value: bytes | None) -> int:
    if not value or not value.isdigit() or not value.isascii():
        shown = value.decode("ascii", "replace") if value is not None else "null"
        raise _Refused(f"header {name} must be ASCII decimal milliseconds, got '{shown}'")
    return int(value)


def _header(record: Record, name: str) -> list[bytes | None]:
    """The header's values: none or one (twice is as ambiguous as malformed)."""
    found = [value for key, value in record.headers if key == name]
    if len(found) > 1:
        raise _Refused(f"header {name} appears {len(found)} times")
    return found


def due_time(record: Record, settings: DelaySettings, now_ms: int) -> int:
    """When the record becomes readable (<= now_ms: at once). Raises _Refused."""
    delay = _header(record, DELAY_MS_HEADER)
    deliver_at = _header(record, DELIVER_AT_HEADER)
    if delay and deliver_at:
        raise _Refused(f"headers {DELAY_MS_HEADER} and {DELIVER_AT_HEADER} exclude each other")
    if delay:
        name, due = DELAY_MS_HEADER, now_ms + _decimal(DELAY_MS_HEADER, delay[0])
    elif deliver_at:
        name, due = DELIVER_AT_HEADER, _decimal(DELIVER_AT_HEADER, deliver_at[0])
    else:
        name, due = TOPIC_DELAY_CONFIG, now_ms + settings.topic_delay_ms
    if due - now_ms > settings.max_delay_ms:
        raise _Refused(
            f"{name} asks for a delay of {due - now_ms} ms, beyond {MAX_DELAY_CONFIG}="
            f"{settings.max_delay_ms}"
        )
    return due


def due_times(records: Sequence[Record], settings: DelaySettings, now_ms: int) -> list[int]:
    """Each record's due time; raises InvalidRecordError naming every refused record."""
    dues, refused = [], []
    for index, record in enumerate(records):
        try:
            dues.append(due_time(record, settings, now_ms))
        except _Refused as exc:
            refused.append(RecordError(index, str(exc)))
    if refused:
        raise InvalidRecordError.rejecting(refused)
    return dues


def batch_due_times(
    batch: bytes, header: BatchHeader, settings: DelaySettings, now_ms: int
) -> list[int]:
    """`due_times` of one produced batch, which is decoded only if one of the headers' names
    may be in it (or each record must be refused for the topic delay). A retry topic's
    records are due after their attempt's backoff."""
    if settings.retry is not None:
        return retry_due_times(decode_records(batch), settings.retry, now_ms)
    if settings.topic_delay_ms <= settings.max_delay_ms:
        payload = decompress(header.compression, memoryview(batch)[HEADER_SIZE : header.size])
        if _HEADER_NAMES_PREFIX not in payload:
            return [now_ms + settings.topic_delay_ms] * header.records_count
    return due_times(decode_records(batch), settings, now_ms)


# -- store records ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dues:
    """The due times of the held batch appended right after this record (`crc` and the
    count identify that batch: a torn write may leave a Dues record without its batch)."""

    offset: int
    crc: int
    due_ms: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReleaseProducer:
    """The broker-owned idempotent producer a release to another partition is appended with
    (broker/release_forwarding.py): its target deduplicates a resend."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


@dataclass(frozen=True, slots=True)
class Intent:
    offset: int  # the intent's own offset in the store
    target: tuple[str, int]  # the partition released to (a retry topic's: another topic's)
    target_offset: int  # its log end then (-1 for a forwarded release: not known here)
    store_offsets: tuple[int, ...]
    producer: ReleaseProducer | None = None  # a forwarded release's


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The forwarded release of the intent at `intent_offset` is done (appended, or its
    records dropped)."""

    intent_offset: int


@dataclass(frozen=True, slots=True)
class TxnEnd:
    """A producer's transaction ended: its held records go (commit) or are dropped."""

    producer_id: int
    commit: bool


def _marker_batch(name: str, value: bytes, now_ms: int) -> bytes:
    """A one-record batch of the store's own (keyed: a compacted topic's store takes it)."""
    record = Record(0, now_ms, STORE_KEY, value, ((name, b""),))
    return encode_record_batch([record], base_offset=0, base_timestamp=now_ms, max_timestamp=now_ms)


def encode_dues(header: BatchHeader, dues: Sequence[int], now_ms: int) -> bytes:
    """Written with the produced batch, just before it, in the same append."""
    value = _DUES.pack(header.crc, len(dues)) + struct.pack(f">{len(dues)}q", *dues)
    return _marker_batch(DUES_HEADER, value, now_ms)


def encode_intent(
    target: tuple[str, int],
    target_offset: int,
    store_offsets: Sequence[int],
    now_ms: int,
    producer: ReleaseProducer | None = None,
) -> bytes:
    """Written to the store before the partition append: these held records are being
    released to `target` at `target_offset` (its log end then), or forwarded by `producer`."""
    topic = target[0].encode()
    value = (
        _INTENT.pack(target_offset, target[1], len(store_offsets), len(topic))
        + topic
        + struct.pack(f">{len(store_offsets)}q", *store_offsets)
    )
    if producer is not None:
        value += _PRODUCER.pack(
            producer.producer_id, producer.producer_epoch, producer.base_sequence
        )
    return _marker_batch(RELEASE_HEADER, value, now_ms)


def encode_forwarded(intent_offset: int, now_ms: int) -> bytes:
    """Written when the forwarded release of the intent at `intent_offset` is done."""
    return _marker_batch(FORWARDED_HEADER, _OFFSET.pack(intent_offset), now_ms)


def encode_cancel(intent_offset: int, now_ms: int) -> bytes:
    """Written when the partition append of the intent at `intent_offset` failed."""
    return _marker_batch(CANCEL_HEADER, _OFFSET.pack(intent_offset), now_ms)


def encode_txn_end(producer_id: int, commit: bool, now_ms: int) -> bytes:
    """Written when the transaction's marker reaches the partition, before it is appended."""
    return _marker_batch(TXN_END_HEADER, _TXN_END.pack(producer_id, commit), now_ms)


def decode_marker(record: Record) -> Dues | Intent | TxnEnd | Forwarded | int | None:
    """A record the store wrote: Dues, an Intent, a TxnEnd, Forwarded, or the offset of a
    cancelled intent."""
    name = record.headers[-1][0] if record.headers else None
    value = record.value or b""
    if name == DUES_HEADER:
        crc, count = _DUES.unpack_from(value)
        return Dues(record.offset, crc, struct.unpack_from(f">{count}q", value, _DUES.size))
    if name == RELEASE_HEADER:
        target_offset, partition, count, topic_size = _INTENT.unpack_from(value)
        topic = value[_INTENT.size : _INTENT.size + topic_size].decode()
        end = _INTENT.size + topic_size
        offsets = struct.unpack_from(f">{count}q", value, end)
        end += 8 * count
        producer = None
        if len(value) >= end + _PRODUCER.size:  # a forwarded release's
            producer = ReleaseProducer(*_PRODUCER.unpack_from(value, end))
        return Intent(record.offset, (topic, partition), target_offset, offsets, producer)
    if name == FORWARDED_HEADER:
        return Forwarded(int(_OFFSET.unpack_from(value)[0]))
    if name == TXN_END_HEADER:
        producer_id, commit = _TXN_END.unpack_from(value)
        return TxnEnd(producer_id, commit)
    if name == CANCEL_HEADER:
        return int(_OFFSET.unpack_from(value)[0])
    return None


def encode_released(records: Sequence[Record], producer: ReleaseProducer | None = None) -> bytes:
    """One batch of due records for the partition (offsets assigned by its log), with their
    keys, values, headers and timestamps; idempotent when forwarded by `producer`."""
    timestamps = [record.timestamp for record in records]
    if producer is None:
        producer = ReleaseProducer(NO_PRODUCER_ID, -1, NO_SEQUENCE)
    return encode_record_batch(
        [replace(record, offset=i) for i, record in enumerate(records)],
        base_offset=0,
        base_timestamp=min(timestamps),
        max_timestamp=max(timestamps),
        compression=NONE,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=producer.base_sequence,
    )
