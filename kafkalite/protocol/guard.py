"""A bounds pass over a request frame, driven by kio's schema, before kio's native reader runs.

kio's reader trusts length fields: a compact array length of 0xffffffff makes it allocate
32 GiB and abort the whole process (README, known issues). This pass walks the fields kio will
read, in the same order, allocating nothing per element, and raises FrameError when
- an array, string or bytes length exceeds the bytes left in the frame, or is negative other
  than null (-1 legacy, 0 compact);
- null appears where the schema forbids it at this version (kio hands None to the handler);
- a varint is longer than 5 bytes or exceeds 32 bits (kio turns those into huge lengths);
- a known tagged field's value does not fill exactly the size its tag declares (kio reads the
  value and ignores the size, so the two walks would part and kio would read unchecked bytes).
Unknown tags are skipped by their size, as Kafka does (kio then refuses them: README, known
issues).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache

from kio.index import load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from kafkalite.protocol.errors import FrameError

# (frame, position, end) -> position after the value; raises FrameError.
Step = Callable[[bytes, int, int], int]
# (frame, position, end, where) -> (length, or -1 for null; position after the length)
LengthReader = Callable[[bytes, int, int, str], tuple[int, int]]

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def check_request(frame: bytes, api_key: int, version: int) -> None:
    """Raise FrameError unless kio can read this request without trusting a bad length."""
    check_header, check_body = _request_steps(api_key, version)
    end = len(frame)
    check_body(frame, check_header(frame, 0, end), end)


@cache
def _request_steps(api_key: int, version: int) -> tuple[Step, Step]:
    schema = load_request_schema(api_key, version)
    header: type = schema.__header_schema__
    return _entity(header)[0], _entity(schema)[0]


# -- reading lengths -----------------------------------------------------------------------------


def _truncated(where: str) -> FrameError:
    return FrameError(f"{where}: the frame ends inside the field")


def _uvarint(frame: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise _truncated(where)
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > 0xFFFF_FFFF:
                raise FrameError(f"{where}: unsigned varint exceeds 32 bits")
            return value, pos
        shift += 7
        if shift == 35:
            raise FrameError(f"{where}: varint longer than 5 bytes")


def _compact_length(frame: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    encoded, pos = _uvarint(frame, pos, end, where)
    return encoded - 1, pos


def _legacy_length(fmt: struct.Struct) -> LengthReader:
    def read(frame: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
        if pos + fmt.size > end:
            raise _truncated(where)
        (length,) = fmt.unpack_from(frame, pos)
        if length < -1:
            raise FrameError(f"{where}: negative length {length}")
        return length, pos + fmt.size

    return read


_legacy16 = _legacy_length(_I16)
_legacy32 = _legacy_length(_I32)


def _null(where: str) -> FrameError:
    return FrameError(f"{where}: null where the schema does not allow it")


# -- steps ---------------------------------------------------------------------------------------


def _fixed(size: int, where: str) -> Step:
    def step(frame: bytes, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise _truncated(where)
        return pos

    return step


def _blob(read_length: LengthReader, nullable: bool, where: str) -> Step:
    """A string, bytes or records value: its length, then that many bytes."""

    def step(frame: bytes, pos: int, end: int) -> int:
        length, pos = read_length(frame, pos, end, where)
        if length < 0:
            if not nullable:
                raise _null(where)
            return pos
        if length > end - pos:
            raise FrameError(f"{where}: length {length} exceeds the {end - pos} bytes left")
        return pos + length

    return step


def _array(
    read_length: LengthReader, nullable: bool, element: Step | None, element_min: int, where: str
) -> Step:
    """An array; `element` None means fixed-size elements of `element_min` bytes."""

    def step(frame: bytes, pos: int, end: int) -> int:
        count, pos = read_length(frame, pos, end, where)
        if count < 0:
            if not nullable:
                raise _null(where)
            return pos
        if count * element_min > end - pos:
            raise FrameError(f"{where}: {count} elements cannot fit in the {end - pos} bytes left")
        if element is None:
            return pos + count * element_min
        for _ in range(count):
            pos = element(frame, pos, end)
        return pos

    return step


def _nullable_struct(element: Step, where: str) -> Step:
    """A nullable struct (KIP-893): an int8 marker, -1 for null (kio reads any other value as
    "a struct follows", so this walk does too), then the struct."""

    def step(frame: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise _truncated(where)
        if frame[pos] == 0xFF:
            return pos + 1
        return element(frame, pos + 1, end)

    return step


def _tagged_fields(known: dict[int, Step], where: str) -> Step:
    def step(frame: bytes, pos: int, end: int) -> int:
        count, pos = _uvarint(frame, pos, end, where)
        if 2 * count > end - pos:  # a tag and a size at least
            raise FrameError(f"{where}: {count} tagged fields cannot fit in {end - pos} bytes")
        for _ in range(count):
            tag, pos = _uvarint(frame, pos, end, where)
            size, pos = _uvarint(frame, pos, end, where)
            if size > end - pos:
                raise FrameError(f"{where}: tag {tag} of {size} bytes exceeds the bytes left")
            stop = pos + size
            check = known.get(tag)
            if check is not None and check(frame, pos, stop) != stop:
                raise FrameError(f"{where}: tag {tag} does not fill its {size} bytes")
            pos = stop
        return pos

    return step


def _sequence(steps: tuple[Step, ...]) -> Step:
    if len(steps) == 1:
        return steps[0]

    def step(frame: bytes, pos: int, end: int) -> int:
        for part in steps:
            pos = part(frame, pos, end)
        return pos

    return step


# -- compiling kio's schema into steps ----------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Compiled:
    step: Step | None  # None: a fixed-size value of `min_size` bytes
    min_size: int


@cache
def _entity(cls: type) -> tuple[Step, int]:
    """The step checking one entity of `cls`, and the fewest bytes an entity takes."""
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]  # kio's entity classes
    is_header = cls.__name__ == "RequestHeader"
    steps: list[Step] = []
    known_tags: dict[int, Step] = {}
    fixed_run, fixed_where, min_size = 0, "", 0

    for field in dataclasses.fields(cls):
        where = f"{cls.__name__}.{field.name}"
        tag = get_field_tag(field)
        compiled = _field(field, flexible, is_header, where, tagged=tag is not None)
        if tag is not None:
            known_tags[int(tag)] = compiled.step or _fixed(compiled.min_size, where)
            continue
        min_size += compiled.min_size
        if compiled.step is None:  # merge runs of fixed-size fields into one bounds check
            fixed_where = fixed_where or where
            fixed_run += compiled.min_size
            continue
        if fixed_run:
            steps.append(_fixed(fixed_run, fixed_where))
            fixed_run, fixed_where = 0, ""
        steps.append(compiled.step)
    if fixed_run:
        steps.append(_fixed(fixed_run, fixed_where))
    if flexible:
        steps.append(_tagged_fields(known_tags, f"{cls.__name__} tagged fields"))
        min_size += 1
    elif known_tags:
        raise TypeError(f"{cls.__name__}: tagged fields in a non-flexible entity")
    return _sequence(tuple(steps)) if steps else _fixed(0, cls.__name__), min_size


def _field(
    field: dataclasses.Field, flexible: bool, is_header: bool, where: str, *, tagged: bool
) -> _Compiled:
    # Kafka writes the header's client id as a legacy nullable string in every header version.
    if is_header and field.name == "client_id":
        return _Compiled(_blob(_legacy16, True, where), 2)
    # kio reads tagged fields as non-nullable: their absence is their null.
    nullable = not tagged and is_optional(field)
    kind = classify_field(field)
    if isinstance(kind, EntityField | EntityTupleField):
        element, element_min = _entity(kind.type_)
        if isinstance(kind, EntityField) and nullable:
            return _Compiled(_nullable_struct(element, where), 1)
        element_compiled = _Compiled(element, element_min)
    else:
        element_compiled = _primitive(
            get_schema_field_type(field), flexible, nullable and not kind.is_array, where
        )
    if not kind.is_array:
        return element_compiled
    read_length = _compact_length if flexible else _legacy32
    step = _array(
        read_length,
        nullable,
        element_compiled.step,
        max(element_compiled.min_size, 1),
        where,
    )
    return _Compiled(step, 1 if flexible else 4)


def _primitive(kafka_type: str, flexible: bool, nullable: bool, where: str) -> _Compiled:
    if kafka_type in _FIXED_SIZES:
        return _Compiled(None, _FIXED_SIZES[kafka_type])
    if kafka_type == "string":
        if flexible:
            return _Compiled(_blob(_compact_length, nullable, where), 1)
        return _Compiled(_blob(_legacy16, nullable, where), 2)
    if kafka_type in ("bytes", "records"):
        if flexible:
            return _Compiled(_blob(_compact_length, nullable, where), 1)
        return _Compiled(_blob(_legacy32, nullable, where), 4)
    raise TypeError(f"{where}: no bounds check for kafka type {kafka_type!r}")
