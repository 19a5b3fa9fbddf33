"""Records of the internal topic `__consumer_offsets`, byte-exact with Apache Kafka 4.x.

kio does not ship these schemas, so they are written out here from Kafka's
group-coordinator/src/main/resources/common/message/{OffsetCommit,GroupMetadata}{Key,Value}.json.

Record key = int16 record type, then the key struct (always non-flexible, version 0 layout):
  0, 1  OffsetCommitKey   {group string, topic string, partition int32}
        (Kafka 4 calls type 0 LegacyOffsetCommitKey; same layout)
  2     GroupMetadataKey  {group string}
  3-8   KIP-848 consumer group records: consumer_group_records.py
  9+    Kafka 4's share / streams group records: not ours, skipped.
Record value = int16 value version, then the value struct; None is a tombstone.

Non-flexible versions use int16-length strings, int32-length bytes and int32-count arrays;
flexible versions (4+) use unsigned-varint (length + 1) compact forms and end every struct
with a tagged-fields section.

What Kafka 4 writes (GroupCoordinatorRecordHelpers, MetadataVersion.offsetCommitValueVersion
and groupMetadataValueVersion for every MetadataVersion Kafka 4 supports): key type 1 for
offsets and 2 for groups; OffsetCommitValue v1 when the commit carries an expire timestamp
(v1 has no leader epoch: Kafka drops it), else v3; GroupMetadataValue v3. v4 (flexible) is
readable but never written, "until a tagged field is introduced".
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kafkalite.coordinator.offsets import NO_LEADER_EPOCH, OffsetAndMetadata

LEGACY_OFFSET_COMMIT_KEY = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2

OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 4  # both value schemas: validVersions 0-4
FIRST_FLEXIBLE_VERSION = 4

NO_TIMESTAMP = -1
_MAX_STRING_BYTES = 0x7FFF  # Kafka refuses longer strings, compact ones included
_MAX_VARINT_BYTES = 5


class InvalidRecord(ValueError):
    """A `__consumer_offsets` key or value that is truncated, malformed or of unknown version."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberMetadataRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader: str | None
    # -1 when unknown, and in versions 0-1 which lack the field.
    current_state_timestamp_ms: int = NO_TIMESTAMP
    members: tuple[MemberMetadataRecord, ...] = ()


# -- public API: keys --


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a `__consumer_offsets` record; None for record types that are not ours."""
    reader = Reader(data, flexible=False)
    record_type = reader.int16()
    if record_type in (LEGACY_OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY):
        group_id = reader.string()
        topic = reader.string()
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(group_id, topic, reader.int32())
    elif record_type == GROUP_METADATA_KEY:
        key = GroupMetadataKey(reader.string())
    else:
        return None
    reader.finish()
    return key


def encode_offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    writer = Writer(flexible=False)
    writer.int16(OFFSET_COMMIT_KEY)
    writer.string(group_id)
    writer.string(topic)
    writer.int32(partition)
    return writer.getvalue()


def encode_group_metadata_key(group_id: str) -> bytes:
    writer = Writer(flexible=False)
    writer.int16(GROUP_METADATA_KEY)
    writer.string(group_id)
    return writer.getvalue()


# -- public API: offset commits --


def offset_commit_record(
    group_id: str, topic: str, partition: int, value: OffsetAndMetadata
) -> tuple[bytes, bytes]:
    """(key, value) of a committed offset, in the versions Kafka 4 writes."""
    version = (
        OFFSET_COMMIT_VALUE_VERSION
        if value.expire_timestamp_ms is None
        else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    )
    key = encode_offset_commit_key(group_id, topic, partition)
    return key, encode_offset_commit_value(value, version)


def offset_tombstone(group_id: str, topic: str, partition: int) -> tuple[bytes, None]:
    return encode_offset_commit_key(group_id, topic, partition), None


def encode_offset_commit_value(value: OffsetAndMetadata, version: int) -> bytes:
    """OffsetCommitValue at `version`; fields the version lacks are dropped, as Kafka does."""
    writer = _value_writer(version)
    writer.int64(value.offset)
    if version >= 3:
        writer.int32(value.leader_epoch)
    writer.string(value.metadata)
    writer.int64(value.commit_timestamp_ms)
    if version == 1:
        expire = value.expire_timestamp_ms
        writer.int64(NO_TIMESTAMP if expire is None else expire)
    writer.end_struct()
    return writer.getvalue()


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    """Any OffsetCommitValue version 0-4, absent fields defaulted like Kafka's loader."""
    reader, version = _value_reader(data, "OffsetCommitValue")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string()
    commit_timestamp_ms = reader.int64()
    expire = reader.int64() if version == 1 else NO_TIMESTAMP
    reader.end_struct()
    reader.finish()
    return OffsetAndMetadata(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp_ms=commit_timestamp_ms,
        # Kafka reads the -1 sentinel as "no expire timestamp".
        expire_timestamp_ms=None if expire == NO_TIMESTAMP else expire,
    )


# -- public API: group metadata --


def group_metadata_record(group_id: str, record: GroupMetadataRecord) -> tuple[bytes, bytes]:
    """(key, value) of a classic group's metadata, in the versions Kafka 4 writes."""
    value = encode_group_metadata_value(record, GROUP_METADATA_VALUE_VERSION)
    return encode_group_metadata_key(group_id), value


def group_tombstone(group_id: str) -> tuple[bytes, None]:
    return encode_group_metadata_key(group_id), None


def encode_group_metadata_value(record: GroupMetadataRecord, version: int) -> bytes:
    """GroupMetadataValue at `version`; fields the version lacks are dropped, as Kafka does."""
    writer = _value_writer(version)
    writer.string(record.protocol_type)
    writer.int32(record.generation)
    writer.nullable_string(record.protocol_name)
    writer.nullable_string(record.leader)
    if version >= 2:
        writer.int64(record.current_state_timestamp_ms)
    writer.array_length(len(record.members))
    for member in record.members:
        _write_member(writer, member, version)
    writer.end_struct()
    return writer.getvalue()


def decode_group_metadata_value(data: bytes) -> GroupMetadataRecord:
    """Any GroupMetadataValue version 0-4, absent fields defaulted like Kafka's loader."""
    reader, version = _value_reader(data, "GroupMetadataValue")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol_name = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.int64() if version >= 2 else NO_TIMESTAMP
    members = tuple(_read_member(reader, version) for _ in range(reader.array_length()))
    reader.end_struct()
    reader.finish()
    return GroupMetadataRecord(
        protocol_type=protocol_type,
        generation=generation,
        protocol_name=protocol_name,
        leader=leader,
        current_state_timestamp_ms=timestamp,
        members=members,
    )


def _write_member(writer: Writer, member: MemberMetadataRecord, version: int) -> None:
    writer.string(member.member_id)
    if version >= 3:
        writer.nullable_string(member.group_instance_id)
    writer.string(member.client_id)
    writer.string(member.client_host)
    if version >= 1:
        writer.int32(member.rebalance_timeout_ms)
    writer.int32(member.session_timeout_ms)
    writer.bytes_(member.subscription)
    writer.bytes_(member.assignment)
    writer.end_struct()


def _read_member(reader: Reader, version: int) -> MemberMetadataRecord:
    member_id = reader.string()
    group_instance_id = reader.nullable_string() if version >= 3 else None
    client_id = reader.string()
    client_host = reader.string()
    rebalance_timeout_ms = reader.int32() if version >= 1 else None
    session_timeout_ms = reader.int32()
    subscription = reader.bytes_()
    assignment = reader.bytes_()
    reader.end_struct()
    return MemberMetadataRecord(
        member_id=member_id,
        group_instance_id=group_instance_id,
        client_id=client_id,
        client_host=client_host,
        # v0 predates rebalance timeouts: Kafka's loader uses the session timeout.
        rebalance_timeout_ms=(
            session_timeout_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        ),
        session_timeout_ms=session_timeout_ms,
        subscription=subscription,
        assignment=assignment,
    )


# -- wire primitives --


def _value_writer(version: int) -> Writer:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise ValueError(f"value version {version} is not in 0-{MAX_VALUE_VERSION}")
    writer = Writer(flexible=version >= FIRST_FLEXIBLE_VERSION)
    writer.int16(version)
    return writer


def _value_reader(data: bytes, schema: str) -> tuple[Reader, int]:
    reader = Reader(data, flexible=False)
    version = reader.int16()  # the version prefix itself is always a plain int16
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise InvalidRecord(f"unknown {schema} version {version}")
    reader.flexible = version >= FIRST_FLEXIBLE_VERSION
    return reader, version


_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Writer:
    def __init__(self, *, flexible: bool) -> None:
        self._flexible = flexible
        self._out = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self._out)

    def int8(self, value: int) -> None:
        self._pack(_INT8, value)

    def int16(self, value: int) -> None:
        self._pack(_INT16, value)

    def int32(self, value: int) -> None:
        self._pack(_INT32, value)

    def int64(self, value: int) -> None:
        self._pack(_INT64, value)

    def string(self, value: str) -> None:
        encoded = value.encode("utf-8")
        if len(encoded) > _MAX_STRING_BYTES:
            raise ValueError(f"string of {len(encoded)} bytes is too long to serialize")
        self._length(len(encoded), _INT16)
        self._out += encoded

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self._length(-1, _INT16)
        else:
            self.string(value)

    def bytes_(self, value: bytes) -> None:
        self._length(len(value), _INT32)
        self._out += value

    def uuid(self, value: uuid.UUID) -> None:
        self._out += value.bytes

    def array_length(self, count: int) -> None:
        self._length(count, _INT32)

    def end_struct(self) -> None:
        if self._flexible:
            self._uvarint(0)  # no tagged fields

    def _length(self, length: int, fixed: struct.Struct) -> None:
        # Compact forms store length + 1 so that 0 means null (-1).
        if self._flexible:
            self._uvarint(length + 1)
        else:
            self._pack(fixed, length)

    def _uvarint(self, value: int) -> None:
        while value >= 0x80:
            self._out.append((value & 0x7F) | 0x80)
            value >>= 7
        self._out.append(value)

    def _pack(self, fmt: struct.Struct, value: int) -> None:
        try:
            self._out += fmt.pack(value)
        except struct.error as exc:
            raise ValueError(f"{value} does not fit the field: {exc}") from exc


class Reader:
    def __init__(self, data: bytes, *, flexible: bool) -> None:
        self._data = memoryview(data)
        self.flexible = flexible
        self._position = 0

    def finish(self) -> None:
        trailing = len(self._data) - self._position
        if trailing:
            raise InvalidRecord(f"{trailing} unexpected trailing bytes")

    def int8(self) -> int:
        return _INT8.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self._take(8))[0]

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise InvalidRecord("non-nullable string serialized as null")
        return value

    def nullable_string(self) -> str | None:
        length = self._length(_INT16)
        if length is None:
            return None
        if length > _MAX_STRING_BYTES:
            raise InvalidRecord(f"string length {length} is invalid")
        try:
            return str(self._take(length), "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecord(f"string is not valid UTF-8: {exc}") from exc

    def bytes_(self) -> bytes:
        length = self._length(_INT32)
        if length is None:
            raise InvalidRecord("non-nullable bytes serialized as null")
        return bytes(self._take(length))

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def array_length(self) -> int:
        count = self._length(_INT32)
        if count is None:
            raise InvalidRecord("non-nullable array serialized as null")
        # Every element takes at least one byte: refuse absurd counts before looping.
        if count > len(self._data) - self._position:
            raise InvalidRecord(f"array of {count} elements overruns the record")
        return count

    def end_struct(self) -> None:
        if not self.flexible:
            return
        # Unknown tagged fields (newer Kafka) are skipped, as Kafka's generated readers do.
        for _ in range(self._uvarint()):
            self._uvarint()  # tag
            self._take(self._uvarint())

    def _length(self, fixed: struct.Struct) -> int | None:
        """A length prefix; None for null. Other negative lengths are corrupt."""
        length = self._uvarint() - 1 if self.flexible else fixed.unpack(self._take(fixed.size))[0]
        if length == -1:
            return None
        if length < 0:
            raise InvalidRecord(f"negative length {length}")
        return length

    def _uvarint(self) -> int:
        value = 0
        for index in range(_MAX_VARINT_BYTES):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return value
        raise InvalidRecord("unsigned varint longer than 5 bytes")

    def _take(self, size: int) -> memoryview:
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise InvalidRecord(
                f"truncated: needs {size} bytes at {self._position}, has {len(self._data)}"
            )
        chunk = self._data[self._position : end]
        self._position = end
        return chunk
