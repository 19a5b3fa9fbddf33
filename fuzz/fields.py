"""Structure-aware mutants: one field of a valid request set to an odd but well-formed value
(negative and huge numbers, empty, long and odd strings, empty or repeated arrays, null where the
schema allows it), written by kio, so the mutant parses and reaches the handler."""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from fuzz.seeds import FUZZ_TOPIC, Seed, encode
from protocol_tests.batches import simple_batch

_INTS = {
    "int8": (-128, -1, 0, 1, 2, 127),
    "int16": (-32768, -2, -1, 0, 1, 2, 32767),
    "int32": (-(2**31), -2, -1, 0, 1, 2, 3, 1000, 100_000, 2**31 - 1),
    "int64": (-(2**63), -2, -1, 0, 1, 2**31, 2**62, 2**63 - 1),
}
_MS = datetime.timedelta(milliseconds=1)
_TIMEDELTAS = (-1 * _MS, 0 * _MS, 1 * _MS, 5000 * _MS)
_STRINGS = (
    "",
    ".",
    "..",
    "a/b",
    "a" * 250,
    "b" * 300,
    "\u00e9\u4e2d\U0001f600",
    "__consumer_offsets",
    FUZZ_TOPIC,
    "fuzz-topic-0",
    " ",
    "\x00",
)


def mutate_fields(rng: random.Random, seed: Seed) -> bytes | None:
    """The seed with one field changed, or None when kio cannot write the change."""
    if seed.body is None:
        return None
    try:
        return encode(seed.header, _entity(rng, seed.body))[0]
    except Exception:  # a value the writer refuses (out of range for the field)
        return None


def _entity(rng: random.Random, entity: Any) -> Any:
    fields = dataclasses.fields(entity)
    if not fields:
        return entity
    field = rng.choice(fields)
    value = _value(rng, field, getattr(entity, field.name))
    return dataclasses.replace(entity, **{field.name: value})


def _value(rng: random.Random, field: dataclasses.Field, value: Any) -> Any:
    kind = classify_field(field)
    nullable = is_optional(field)
    if nullable and rng.random() < 0.1:
        return None
    if isinstance(kind, EntityField):
        return value if value is None else _entity(rng, value)
    if isinstance(kind, EntityTupleField | PrimitiveTupleField):
        items = tuple(value or ())
        draw = rng.random()
        if draw < 0.15 or not items:
            return ()
        if draw < 0.3:
            return items * rng.choice((2, 3, 50))
        index = rng.randrange(len(items))
        if isinstance(kind, EntityTupleField):
            changed = _entity(rng, items[index])
        else:
            changed = _primitive(rng, get_schema_field_type(field), items[index])
        return items[:index] + (changed,) + items[index + 1 :]
    return _primitive(rng, get_schema_field_type(field), value)


def _primitive(rng: random.Random, kafka_type: str, value: Any) -> Any:
    if kafka_type in _INTS:
        return rng.choice(_INTS[kafka_type])
    if kafka_type == "string":
        return rng.choice(_STRINGS)
    if kafka_type == "bool":
        return not value
    if kafka_type.startswith("timedelta"):
        return rng.choice(_TIMEDELTAS)
    if kafka_type == "uuid":
        return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
    if kafka_type == "records":
        batch = bytearray(simple_batch(rng.choice((1, 3))))
        if rng.random() < 0.7:  # a batch whose header fields lie
            pos = rng.randrange(len(batch))
            batch[pos] = rng.randrange(256)
        return bytes(batch[: rng.randrange(len(batch) + 1)] if rng.random() < 0.2 else batch)
    if kafka_type == "bytes":
        return rng.randbytes(rng.choice((0, 1, 8, 64)))
    return value
