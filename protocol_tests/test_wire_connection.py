"""Connection handling: pipelining, and bad frames that close only their own connection."""

from __future__ import annotations

import datetime
import socket
import struct
from collections.abc import Callable

import pytest

from protocol_tests.batches import simple_batch
from protocol_tests.raw_client import (
    SOCKET_REQUEST_MAX_BYTES,
    RawClient,
    api_versions_request,
    build,
    encode_request,
    fetch_request,
    list_offsets_request,
    metadata_request,
    produce_request,
    response_class,
)

NONE = 0


def test_pipelined_requests_answered_in_order(
    client: RawClient, new_topic: Callable[..., tuple[str, object]]
) -> None:
    topic, _ = new_topic()
    # A long-polling fetch first: later requests must still wait behind it, in order.
    requests = [
        fetch_request(topic, 0, 0, max_wait_ms=300, min_bytes=1),
        api_versions_request(3),
        produce_request(topic, 0, simple_batch(2)),
        metadata_request([topic], auto_create=False),
        api_versions_request(0),
        list_offsets_request(topic, 0, -1),
        fetch_request(topic, 0, 0),
    ]
    correlation_ids = [1000 + 7 * i for i in range(len(requests))]
    client.send_raw(
        b"".join(
            struct.pack(">i", len(frame)) + frame
            for frame in (
                encode_request(request, cid)
                for request, cid in zip(requests, correlation_ids, strict=True)
            )
        )
    )
    responses = []
    for request, cid in zip(requests, correlation_ids, strict=True):
        cls = response_class(type(request).__api_key__, type(request).__version__)
        got, response = client.recv(cls)
        assert got == cid
        responses.append(response)
    first_fetch, _, produced, metadata, _, offsets, last_fetch = responses
    assert not first_fetch.responses[0].partitions[0].records  # answered before the produce
    assert produced.responses[0].partition_responses[0].base_offset == 0
    assert metadata.topics[0].name == topic
    assert offsets.topics[0].partitions[0].offset == 2
    assert last_fetch.responses[0].partitions[0].high_watermark == 2


def test_many_pipelined_requests(client: RawClient) -> None:
    """More requests in flight than the broker queues (16): all answered, in order."""
    count = 100
    frames = [encode_request(api_versions_request(3), cid) for cid in range(count)]
    client.send_raw(b"".join(struct.pack(">i", len(f)) + f for f in frames))
    for cid in range(count):
        got, response = client.recv(response_class(18, 3))
        assert (got, response.error_code) == (cid, NONE)


def _garbage_body() -> bytes:
    """A Metadata v12 header prefix (key, version, correlation id, client id), then bytes
    that do not parse: the tagged-field count is a varint that never ends."""
    frame = struct.pack(">hhih", 3, 12, 5, 4) + b"test" + b"\xff" * 3 + b"\x80" * 40
    return struct.pack(">i", len(frame)) + frame


def _unknown_api_key() -> bytes:
    frame = struct.pack(">hhih", 999, 0, 5, -1)
    return struct.pack(">i", len(frame)) + frame


# Real Kafka APIs kafkalite has no reason to serve soon; the first one not advertised is used.
_UNSERVED_CANDIDATES = (4, 5, 6, 7, 38, 39, 40, 41, 48, 49, 50, 51)


def _unserved_api_key_frame(api_key: int) -> bytes:
    frame = struct.pack(">hhih", api_key, 0, 5, -1) + b"\x00" * 8
    return struct.pack(">i", len(frame)) + frame


def _unsupported_version() -> bytes:
    """Metadata v99: only ApiVersions gets an answer to an unknown version."""
    frame = encode_request(metadata_request(["t"]), 5, api_version=99)
    return struct.pack(">i", len(frame)) + frame


def _too_short() -> bytes:
    return struct.pack(">i", 3) + b"\x00\x03\x00"


BAD_FRAMES: dict[str, Callable[[], bytes]] = {
    "garbage-body": _garbage_body,
    "random-bytes": lambda: struct.pack(">i", 64) + bytes(range(64)),
    "negative-size": lambda: struct.pack(">i", -5) + b"\x00" * 16,
    "size-over-socket-request-max-bytes": lambda: (
        struct.pack(">i", SOCKET_REQUEST_MAX_BYTES + 1) + b"\x00" * 64
    ),
    "size-int-max": lambda: struct.pack(">i", 2**31 - 1),
    "unknown-api-key": _unknown_api_key,
    "unserved-api-key": lambda: b"",  # chosen from ApiVersions in the test
    "unsupported-version": _unsupported_version,
    "shorter-than-header": _too_short,
}


@pytest.mark.parametrize("kind", list(BAD_FRAMES))
def test_bad_frame_closes_only_its_connection(connect: Callable[..., RawClient], kind: str) -> None:
    other = connect()
    versions = other.request(api_versions_request(3))
    assert versions.error_code == NONE
    frame = BAD_FRAMES[kind]()
    if kind == "unserved-api-key":
        advertised = {k.api_key for k in versions.api_keys}
        unserved = next(k for k in _UNSERVED_CANDIDATES if k not in advertised)
        frame = _unserved_api_key_frame(unserved)
    bad = connect()
    bad.send_raw(frame)
    assert bad.is_closed_by_peer(), f"{kind}: the broker kept the connection open"
    assert other.request(api_versions_request(3)).error_code == NONE
    assert connect().request(api_versions_request(3)).error_code == NONE


def test_bad_frame_after_good_requests(connect: Callable[..., RawClient]) -> None:
    """Requests before the bad frame are still answered, then the connection closes."""
    bad = connect()
    good = encode_request(api_versions_request(3), 1)
    bad.send_raw(struct.pack(">i", len(good)) + good + _unknown_api_key())
    got, response = bad.recv(response_class(18, 3))
    assert (got, response.error_code) == (1, NONE)
    assert bad.is_closed_by_peer()


def test_truncated_frame_then_close(connect: Callable[..., RawClient]) -> None:
    other = connect()
    bad = connect()
    frame = encode_request(api_versions_request(3), 9)
    bad.send_raw(struct.pack(">i", len(frame)) + frame[: len(frame) // 2])
    bad.sock.shutdown(socket.SHUT_WR)  # half-close: the request never completes
    assert bad.is_closed_by_peer()
    assert other.request(api_versions_request(3)).error_code == NONE


def test_partial_frame_completed_later_is_served(client: RawClient) -> None:
    """A frame split across many small writes is reassembled."""
    frame = encode_request(api_versions_request(3), 77)
    data = struct.pack(">i", len(frame)) + frame
    for i in range(len(data)):
        client.send_raw(data[i : i + 1])
    got, response = client.recv(response_class(18, 3))
    assert (got, response.error_code) == (77, NONE)


def test_client_disconnect_during_long_poll(
    connect: Callable[..., RawClient], new_topic: Callable[..., tuple[str, object]]
) -> None:
    """A client that goes away while its fetch waits does not disturb the broker."""
    topic, _ = new_topic()
    gone = connect()
    gone.send(fetch_request(topic, 0, 0, max_wait_ms=2000, min_bytes=1))
    gone.close()
    other = connect()
    assert other.request(api_versions_request(3)).error_code == NONE
    response = other.request(produce_request(topic, 0, simple_batch(1)))
    assert response.responses[0].partition_responses[0].error_code == NONE


def test_topic_deleted_during_long_poll(
    connect: Callable[..., RawClient], new_topic: Callable[..., tuple[str, object]]
) -> None:
    """Deleting the topic a fetch is waiting on: the fetch still gets an answer and the
    connection stays usable."""
    topic, _ = new_topic()
    waiting = connect()
    cid = waiting.send(fetch_request(topic, 0, 0, max_wait_ms=1500, min_bytes=1))
    admin = connect()
    request = build(
        20,
        6,
        "DeleteTopicsRequest",
        topics=(build(20, 6, "DeleteTopicState", name=topic, topic_id=None),),
        timeout=datetime.timedelta(seconds=10),
    )
    assert admin.request(request).responses[0].error_code == NONE
    got, response = waiting.recv(response_class(1, 12))
    assert got == cid
    part = response.responses[0].partitions[0]
    assert part.error_code in (NONE, 3)  # UNKNOWN_TOPIC_OR_PARTITION once it is gone
    assert not part.records
    assert waiting.request(api_versions_request(3)).error_code == NONE
