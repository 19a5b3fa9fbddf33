"""Delayed delivery (issue 17): which records of a produced batch are held, until when, and
how held records and release intents are written in a partition's delay store.

A topic opts in with `kafkalite.delayed.delivery.enable=true` (its broker property of the
same name sets the default) or a `kafkalite.delivery.delay.ms` above 0. In such a topic a
record with the header `kafkalite-delay-ms` (ASCII decimal milliseconds after the broker
appends it) or `kafkalite-deliver-at` (ASCII decimal epoch milliseconds) becomes readable at
that time; a record without them waits `kafkalite.delivery.delay.ms`. The store
(broker/delayed_delivery_store.py) keeps each held record with one more header, its due
time; release intents and their cancellations are records of the store too. Sans-IO.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkalite.broker.topic_config import effective_value
from kafkalite.config import BrokerConfig
from kafkalite.storage.batch import BatchHeader
from kafkalite.storage.errors import InvalidRecordError, RecordError
from kafkalite.storage.records import NONE, Record, encode_record_batch

DELAY_MS_HEADER = "kafkalite-delay-ms"
DELIVER_AT_HEADER = "kafkalite-deliver-at"
# The store's own headers (the last header of a store record, never seen by consumers).
DUE_HEADER = "__kafkalite.due.ms"
RELEASE_HEADER = "__kafkalite.release"
CANCEL_HEADER = "__kafkalite.cancel"

ENABLE_CONFIG = "kafkalite.delayed.delivery.enable"
TOPIC_DELAY_CONFIG = "kafkalite.delivery.delay.ms"
MAX_DELAY_CONFIG = "kafkalite.delayed.delivery.max.ms"
PRECISION_CONFIG = "kafkalite.delayed.delivery.precision.ms"

_INTENT = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class DelaySettings:
    """A topic's delayed-delivery configs, resolved against the broker's."""

    enabled: bool
    topic_delay_ms: int
    max_delay_ms: int

    @property
    def active(self) -> bool:
        """Whether produced records of the topic are looked at (decoded) at all."""
        return self.enabled or self.topic_delay_ms > 0


def settings_for(broker: BrokerConfig, overrides: Mapping[str, str]) -> DelaySettings:
    def value(name: str) -> str:
        return effective_value(broker, overrides, name)[0]

    return DelaySettings(
        enabled=value(ENABLE_CONFIG).lower() == "true",
        topic_delay_ms=int(value(TOPIC_DELAY_CONFIG)),
        max_delay_ms=int(value(MAX_DELAY_CONFIG)),
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


# -- store records ------------------------------------------------------------------------


def encode_held(header: BatchHeader, records: Sequence[Record], dues: Sequence[int]) -> bytes:
    """The produced batch as the store keeps it: the same producer id, epoch, sequence and
    record count (so the store's producer state deduplicates retries exactly as the
    partition's would), each record with its due time as one more header."""
    return encode_record_batch(
        [
            Record(i, r.timestamp, r.key, r.value, (*r.headers, (DUE_HEADER, b"%d" % due)))
            for i, (r, due) in enumerate(zip(records, dues, strict=True))
        ],
        base_offset=0,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        attributes=header.attributes,
        compression=header.compression,
    )


def held_due(record: Record) -> int | None:
    """The due time of a held store record; None for an intent or a cancellation."""
    if record.headers and record.headers[-1][0] == DUE_HEADER:
        return int(record.headers[-1][1] or b"0")
    return None


def as_released(record: Record, offset: int) -> Record:
    """The held record as it lands in its partition: its own headers, key, value, timestamp."""
    return Record(offset, record.timestamp, record.key, record.value, record.headers[:-1])


def encode_released(records: Sequence[Record]) -> bytes:
    """One batch of due records for the partition (offsets assigned by its log)."""
    released = [as_released(record, i) for i, record in enumerate(records)]
    timestamps = [record.timestamp for record in released]
    return encode_record_batch(
        released,
        base_offset=0,
        base_timestamp=min(timestamps),
        max_timestamp=max(timestamps),
        compression=NONE,
    )


def encode_intent(target_offset: int, store_offsets: Sequence[int], now_ms: int) -> bytes:
    """Written to the store before the partition append: these held records are being
    released at `target_offset` (the partition's log end then)."""
    value = _INTENT.pack(target_offset, len(store_offsets)) + b"".join(
        _OFFSET.pack(offset) for offset in store_offsets
    )
    record = Record(0, now_ms, None, value, ((RELEASE_HEADER, b""),))
    return encode_record_batch([record], base_offset=0, base_timestamp=now_ms, max_timestamp=now_ms)


def encode_cancel(intent_offset: int, now_ms: int) -> bytes:
    """Written when the partition append of the intent at `intent_offset` failed."""
    record = Record(0, now_ms, None, _OFFSET.pack(intent_offset), ((CANCEL_HEADER, b""),))
    return encode_record_batch([record], base_offset=0, base_timestamp=now_ms, max_timestamp=now_ms)


@dataclass(frozen=True, slots=True)
class Intent:
    offset: int  # the intent's own offset in the store
    target_offset: int
    store_offsets: tuple[int, ...]


def decode_marker(record: Record) -> Intent | int | None:
    """A store record that is not held data: an Intent, or the offset of a cancelled intent."""
    name = record.headers[-1][0] if record.headers else None
    value = record.value or b""
    if name == RELEASE_HEADER:
        target, count = _INTENT.unpack_from(value)
        offsets = struct.unpack_from(f">{count}q", value, _INTENT.size)
        return Intent(record.offset, target, offsets)
    if name == CANCEL_HEADER:
        return int(_OFFSET.unpack_from(value)[0])
    return None
