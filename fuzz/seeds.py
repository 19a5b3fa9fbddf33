"""Valid requests for every API key and version the broker serves, built with kio from its schema.

Every field gets a value of its type; names Kafka uses for topics, partitions, groups, timeouts
and records get values that reach deep into the handlers (the fuzz topic, partition 0, a real
record batch, short timeouts so nothing long-polls). Versions kio has no schema for (Produce
v0-v2) are written by hand.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from kafkalite.apis.registry import HANDLERS
from protocol_tests.batches import simple_batch

FUZZ_TOPIC = "fuzz-topic"
FUZZ_GROUP = "fuzz-group"
NEW_TOPIC = "fuzz-new"  # what CreateTopics seeds create (validate_only, unless mutated)
# What DeleteTopics seeds name (the fuzz topic stays) and CreatePartitions seeds grow: a mutated
# count with validate_only flipped would otherwise give the fuzz topic millions of partitions
# (no per-request partition cap yet, issue 9 point 4).
ABSENT_TOPIC = "fuzz-absent"
_TOPIC_BY_API = {19: NEW_TOPIC, 20: ABSENT_TOPIC, 37: ABSENT_TOPIC}
CLIENT_ID = "fuzz"


@dataclass(frozen=True, slots=True)
class Seed:
    api_key: int
    api_version: int
    frame: bytes  # without the size prefix
    body_start: int  # where the request header ends
    header: Any = None  # the kio entities written (None for versions without a kio schema)
    body: Any = None


def seeds(topic_id: uuid.UUID) -> list[Seed]:
    """One valid request per served (API key, version)."""
    return [request_seed(api_key, version, topic_id) for api_key, version in served_versions()]


def served_versions() -> Iterator[tuple[int, int]]:
    for handler in sorted(HANDLERS.values(), key=lambda h: h.api_key):
        for version in range(handler.min_version, handler.max_version + 1):
            yield handler.api_key, version


def request_seed(api_key: int, version: int, topic_id: uuid.UUID) -> Seed:
    handler = HANDLERS[api_key]
    if version < handler.legacy_below:
        return Seed(api_key, version, _legacy_produce(version), 10 + len(CLIENT_ID))
    schema = load_request_schema(api_key, version)
    header_cls = schema.__header_schema__
    header = header_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=0,
        client_id=CLIENT_ID,
    )
    body = _Builder(api_key, topic_id).entity(schema)
    frame, body_start = encode(header, body)
    return Seed(api_key, version, frame, body_start, header, body)


def encode(header: Any, body: Any) -> tuple[bytes, int]:
    """A request frame written by kio, and where its body starts."""
    buf = io.BytesIO()
    entity_writer(type(header))(buf, header)
    body_start = buf.tell()
    entity_writer(type(body))(buf, body)
    return buf.getvalue(), body_start


def _legacy_produce(version: int) -> bytes:
    """Produce v0-v2 (no kio schema): one topic, one partition, one v2 batch."""
    records = simple_batch(1)
    name = FUZZ_TOPIC.encode()
    frame = struct.pack(">hhih", 0, version, 0, len(CLIENT_ID)) + CLIENT_ID.encode()
    frame += struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", len(name)) + name
    frame += struct.pack(">iii", 1, 0, len(records)) + records
    return frame


_MS = datetime.timedelta(milliseconds=1)
# Values by field name, wherever the name appears (requests share Kafka's vocabulary).
_BY_NAME: dict[str, Any] = {
    "acks": 1,
    "timeout": 100 * _MS,
    "max_wait": 10 * _MS,
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 16,
    "replica_id": -1,
    "session_id": 0,
    "session_epoch": -1,
    "current_leader_epoch": -1,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    "leader_epoch": 0,
    "timestamp": -1,
    "isolation_level": 0,
    "producer_id": -1,
    "producer_epoch": -1,
    "generation_id": -1,
    "generation_id_or_member_epoch": -1,
    "num_partitions": 1,
    "replication_factor": 1,
    "count": 1,
    "validate_only": True,
    "allow_auto_topic_creation": False,
    "resource_type": 2,  # topic
    "resource_name": FUZZ_TOPIC,
    "config_operation": 0,
    "key_type": 0,
    "key": FUZZ_GROUP,
    "group_id": FUZZ_GROUP,
    "member_id": "",
    "group_instance_id": None,
    "protocol_type": "consumer",
    "protocol_name": "range",
    "transactional_id": None,
    "transaction_timeout": 60_000 * _MS,
    "session_timeout": 100 * _MS,
    "rebalance_timeout": 100 * _MS,
    "retention_time": -1 * _MS,
    "rack_id": "",
    "cluster_id": None,
    "assignments": (),
    "configs": (),
    "states_filter": (),
    "types_filter": (),
    "forgotten_topics_data": (),
    "metadata": b"",
    "assignment": b"",
    "committed_metadata": "",
    "client_software_name": "fuzz",
    "client_software_version": "1.0",
}
_TOPIC_FIELDS = {"topic", "topic_name", "name", "topics"}  # string values naming a topic


class _Builder:
    def __init__(self, api_key: int, topic_id: uuid.UUID) -> None:
        self.api_key = api_key
        self.topic_id = topic_id
        self.topic = _TOPIC_BY_API.get(api_key, FUZZ_TOPIC)

    def entity(self, cls: type) -> Any:
        values = {}
        for field in dataclasses.fields(cls):
            if get_field_tag(field) is not None and _has_default(field):
                continue  # tagged fields are optional: leave them out
            values[field.name] = self.value(field)
        return cls(**values)

    def value(self, field: dataclasses.Field) -> Any:
        # A None default applies only where the field is nullable (InitProducerId's
        # transactional id is; the transaction APIs' are not).
        if field.name in _BY_NAME and (_BY_NAME[field.name] is not None or is_optional(field)):
            return _BY_NAME[field.name]
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            return (self.entity(kind.type_),)
        if isinstance(kind, EntityField):
            return self.entity(kind.type_)
        kafka_type = get_schema_field_type(field)
        if isinstance(kind, PrimitiveTupleField):
            if field.name in _TOPIC_FIELDS:
                return (self.topic,)
            return (self.primitive(kafka_type, field.name, optional=False),)
        return self.primitive(kafka_type, field.name, optional=is_optional(field))

    def primitive(self, kafka_type: str, name: str, *, optional: bool) -> Any:
        if kafka_type == "string":
            if name in _TOPIC_FIELDS:
                return self.topic
            return None if optional else "fuzz"
        if kafka_type == "records":
            return simple_batch(1)
        if kafka_type == "bytes":
            return b""
        if kafka_type == "uuid":
            return self.topic_id if "topic" in name else uuid.UUID(int=0)
        if kafka_type == "bool":
            return False
        if kafka_type == "error_code":
            return ErrorCode.none
        if kafka_type.startswith("timedelta"):
            return 100 * _MS
        if kafka_type == "datetime_i64":
            return datetime.datetime.now(datetime.UTC)
        if kafka_type == "float64":
            return 0.0
        if name.endswith(("_epoch", "_id")):
            return -1
        return 0


def _has_default(field: dataclasses.Field) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )
