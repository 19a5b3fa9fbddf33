"""A tiny blocking Kafka client for protocol tests: kio entities in, kio entities out.

Requests are framed as Kafka does: a 4-byte size, the request header (the version the
request class names in `__header_schema__`), then the body, all written by
`kio.serial.entity_writer`. Responses are read with `entity_reader` of the matching response
class. `send_raw` sends arbitrary bytes, for malformed-frame tests.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import itertools
import select
import socket
import struct
import time
import uuid
from functools import cache
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

_SIZE = struct.Struct(">i")
DEFAULT_TIMEOUT = 15.0

# The protocol suite's broker: small limits so the size checks are cheap to exercise.
MESSAGE_MAX_BYTES = 100_000
SOCKET_REQUEST_MAX_BYTES = 1_048_576
PROTOCOL_BROKER_OVERRIDES = {
    "num.partitions": "1",
    "message.max.bytes": str(MESSAGE_MAX_BYTES),
    "socket.request.max.bytes": str(SOCKET_REQUEST_MAX_BYTES),
}


def unique_name(prefix: str = "proto") -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def encode_request(
    request: Any,
    correlation_id: int,
    client_id: str | None = "kafkalite-raw",
    api_version: int | None = None,
) -> bytes:
    """The frame (without size prefix) for a kio request entity.

    `api_version` overrides the version written in the header (the body stays the
    entity's), to send versions the broker does not know.
    """
    header_cls = type(request).__header_schema__
    header = header_cls(
        request_api_key=type(request).__api_key__,
        request_api_version=type(request).__version__ if api_version is None else api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buf = io.BytesIO()
    _writer(header_cls)(buf, header)
    _writer(type(request))(buf, request)
    return buf.getvalue()


def decode_response(frame: bytes, response_cls: type) -> tuple[int, Any]:
    """(correlation id, response entity) of a response frame (without size prefix)."""
    # kio readers return (entity, bytes consumed)
    header, header_size = _reader(response_cls.__header_schema__)(frame, 0)
    body, body_size = _reader(response_cls)(frame, header_size)
    trailing = len(frame) - header_size - body_size
    assert trailing == 0, f"{trailing} trailing bytes after {response_cls.__name__}"
    return header.correlation_id, body


class ConnectionClosed(Exception):
    """The broker closed the connection."""


class RawClient:
    def __init__(
        self, host: str, port: int, timeout: float = DEFAULT_TIMEOUT, source: str | None = None
    ) -> None:
        """`source`: the local address to connect from (another loopback address, say)."""
        bind = None if source is None else (source, 0)
        self.sock = socket.create_connection((host, port), timeout=timeout, source_address=bind)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._correlation = itertools.count(1)
        self._buffer = bytearray()

    # -- sending -----------------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        return next(self._correlation)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)

    def send(
        self,
        request: Any,
        correlation_id: int | None = None,
        api_version: int | None = None,
        client_id: str | None = "kafkalite-raw",
    ) -> int:
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        self.send_frame(encode_request(request, cid, client_id, api_version))
        return cid

    # -- receiving ---------------------------------------------------------------------------

    def _fill(self, wanted: int, deadline: float) -> None:
        while len(self._buffer) < wanted:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete response within {self.timeout}s")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(max(wanted - len(self._buffer), 65536))
            except ConnectionResetError:
                data = b""
            if not data:
                raise ConnectionClosed("broker closed the connection")
            self._buffer += data

    def recv_frame(self, timeout: float | None = None) -> bytes:
        """The next response frame without its size prefix (ConnectionClosed at EOF)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        self._fill(4, deadline)
        (size,) = _SIZE.unpack_from(self._buffer)
        self._fill(4 + size, deadline)
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame

    def recv(self, response_cls: type, timeout: float | None = None) -> tuple[int, Any]:
        return decode_response(self.recv_frame(timeout), response_cls)

    def request(self, request: Any, timeout: float | None = None) -> Any:
        """Send a request and return its response, checking the correlation id."""
        cid = self.send(request)
        response_cls = response_class(type(request).__api_key__, type(request).__version__)
        got, response = self.recv(response_cls, timeout)
        assert got == cid, f"correlation id {got} != {cid}"
        return response

    def readable_within(self, timeout: float) -> bool:
        """Whether the broker sends anything (or closes) within `timeout` seconds."""
        if self._buffer:
            return True
        ready, _, _ = select.select([self.sock], [], [], timeout)
        return bool(ready)

    def is_closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
            if not data:
                return True
            self._buffer += data  # an unexpected response: keep reading until EOF

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- request builders ---------------------------------------------------------------------------
# Each builds a kio request entity of the given version from version-agnostic values.

ZERO_UUID = uuid.UUID(int=0)


@cache
def _module(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def build(api_key: int, version: int, class_name: str, **values: Any) -> Any:
    """A kio request entity; values for fields this version lacks are dropped."""
    cls = getattr(_module(api_key, version), class_name)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def api_versions_request(version: int = 3) -> Any:
    return build(
        18,
        version,
        "ApiVersionsRequest",
        client_software_name="kafkalite-raw",
        client_software_version="1.0",
    )


def metadata_request(names: list[str] | None, auto_create: bool = True, version: int = 12) -> Any:
    topics = None
    if names is not None:
        topics = tuple(
            build(3, version, "MetadataRequestTopic", name=name, topic_id=ZERO_UUID)
            for name in names
        )
    return build(
        3,
        version,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def metadata_by_id_request(topic_id: uuid.UUID, version: int = 12) -> Any:
    topic = build(3, version, "MetadataRequestTopic", name=None, topic_id=topic_id)
    return build(
        3,
        version,
        "MetadataRequest",
        topics=(topic,),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def produce_request(
    topic: str,
    partition: int,
    records: bytes,
    acks: int = -1,
    version: int = 9,
    timeout_ms: int = 10_000,
    transactional_id: str | None = None,
    topic_id: uuid.UUID = ZERO_UUID,
) -> Any:
    """v13+ names the topic by `topic_id` (KIP-516); older versions by `topic`."""
    data = build(0, version, "PartitionProduceData", index=partition, records=records)
    topic_data = build(
        0, version, "TopicProduceData", name=topic, topic_id=topic_id, partition_data=(data,)
    )
    return build(
        0,
        version,
        "ProduceRequest",
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(topic_data,),
    )


def fetch_request(
    topic: str | None,
    partition: int | tuple[int, ...],
    offset: int,
    *,
    version: int = 12,
    topic_id: uuid.UUID = ZERO_UUID,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
) -> Any:
    """A fetch of one topic from `offset`, in one partition or (a tuple) in several."""
    fetch_partitions = tuple(
        build(
            1,
            version,
            "FetchPartition",
            partition=index,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=partition_max_bytes,
        )
        for index in ((partition,) if isinstance(partition, int) else partition)
    )
    fetch_topic = build(
        1, version, "FetchTopic", topic=topic, topic_id=topic_id, partitions=fetch_partitions
    )
    return build(
        1,
        version,
        "FetchRequest",
        cluster_id=None,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(fetch_topic,),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets_request(topic: str, partition: int, timestamp: int, version: int = 7) -> Any:
    part = build(
        2,
        version,
        "ListOffsetsPartition",
        partition_index=partition,
        current_leader_epoch=-1,
        timestamp=timestamp,
    )
    list_topic = build(2, version, "ListOffsetsTopic", name=topic, partitions=(part,))
    return build(
        2, version, "ListOffsetsRequest", replica_id=-1, isolation_level=0, topics=(list_topic,)
    )


def init_producer_id_request(version: int = 4) -> Any:
    return build(
        22,
        version,
        "InitProducerIdRequest",
        transactional_id=None,
        transaction_timeout=datetime.timedelta(milliseconds=60_000),
        producer_id=-1,
        producer_epoch=-1,
    )


def offset_for_leader_epoch_request(
    topic: str, partition: int, leader_epoch: int, version: int = 2
) -> Any:
    part = build(
        23,
        version,
        "OffsetForLeaderPartition",
        partition=partition,
        current_leader_epoch=-1,
        leader_epoch=leader_epoch,
    )
    epoch_topic = build(23, version, "OffsetForLeaderTopic", topic=topic, partitions=(part,))
    return build(23, version, "OffsetForLeaderEpochRequest", replica_id=-1, topics=(epoch_topic,))


def create_topics_request(
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: dict[str, str] | None = None,
    validate_only: bool = False,
    version: int = 7,
) -> Any:
    entries = tuple(
        build(19, version, "CreatableTopicConfig", name=key, value=value)
        for key, value in (configs or {}).items()
    )
    topic = build(
        19,
        version,
        "CreatableTopic",
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=(),
        configs=entries,
    )
    return build(
        19,
        version,
        "CreateTopicsRequest",
        topics=(topic,),
        timeout=datetime.timedelta(milliseconds=30_000),
        validate_only=validate_only,
    )


# -- round trips the test modules share ---------------------------------------------------------


def produce(client: RawClient, topic: str, records: bytes, acks: int = -1) -> tuple[int, int]:
    """Produce `records` to partition 0 of `topic`: (error code, base offset)."""
    response = client.request(produce_request(topic, 0, records, acks=acks))
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def log_end(client: RawClient, topic: str, partition: int = 0) -> int:
    """The partition's log end offset (ListOffsets LATEST, which must not fail)."""
    (part,) = client.request(list_offsets_request(topic, partition, -1)).topics[0].partitions
    assert part.error_code == 0, f"ListOffsets {topic}-{partition}: error {part.error_code}"
    return part.offset
