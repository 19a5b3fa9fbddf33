import datetime
import io
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from kafkalite.apis.api_versions import api_versions_response
from kafkalite.apis.produce_legacy import answer as produce_legacy_answer
from kafkalite.apis.registry import HANDLERS
from kafkalite.protocol.codec import (
    DecodedRequest,
    LegacyRequest,
    UnsupportedApiVersions,
    decode_request,
    encode_response,
)
from kafkalite.protocol.errors import FrameError


def api_versions_frame(version: int = 3, correlation_id: int = 7) -> bytes:
    buf = io.BytesIO()
    header = RequestHeader(
        request_api_key=18,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="test",
    )
    entity_writer(RequestHeader)(buf, header)
    entity_writer(ApiVersionsRequest)(
        buf, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    return buf.getvalue()


def test_decodes_a_request() -> None:
    decoded = decode_request(api_versions_frame(), HANDLERS)
    assert isinstance(decoded, DecodedRequest)
    assert (decoded.api_version, decoded.correlation_id, decoded.client_id) == (3, 7, "test")
    assert decoded.body.client_software_name == "t"


def test_unknown_api_versions_version_is_answered_in_v0() -> None:
    frame = struct.pack(">hhi", 18, 99, 5) + b"\xff\xff"
    assert decode_request(frame, HANDLERS) == UnsupportedApiVersions(5)


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x12",  # shorter than a header
        struct.pack(">hhi", 9999, 0, 1),  # unknown API key
        struct.pack(">hhi", 3, 99, 1),  # unsupported Metadata version
        struct.pack(">hhi", 3, 12, 1) + b"\x00\x04ab",  # body does not parse
    ],
)
def test_bad_frames_raise(frame: bytes) -> None:
    with pytest.raises(FrameError):
        decode_request(frame, HANDLERS)


def test_api_versions_response_header_has_no_tagged_fields() -> None:
    encoded = encode_response(7, api_versions_response(HANDLERS, 3))
    size, correlation_id = struct.unpack_from(">ii", encoded)
    assert size == len(encoded) - 4 and correlation_id == 7
    # Body starts right after the correlation id: error code 0 then the compact api array.
    assert encoded[8:10] == b"\x00\x00"


def test_api_versions_advertises_the_handler_table() -> None:
    response = api_versions_response(HANDLERS, 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {h.api_key: (h.min_version, h.max_version) for h in HANDLERS.values()}
    assert advertised[0][0] == 0  # Produce min version 0 for librdkafka's compression check


def test_produce_v2_is_refused_per_partition() -> None:
    body = struct.pack(">hhi", 0, 2, 11) + struct.pack(">h", 1) + b"c"
    body += struct.pack(">hi", 1, 1000) + struct.pack(">i", 1)
    body += struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + struct.pack(">ii", 0, 3) + b"abc"
    decoded = decode_request(body, HANDLERS)
    assert decoded == LegacyRequest(0, 2, 11, body)
    frame = produce_legacy_answer(2, 11, body)
    size, correlation_id, topics, name_len = struct.unpack_from(">iiih", frame)
    assert (size, correlation_id, topics, name_len) == (len(frame) - 4, 11, 1, 1)
    partitions, index, error, offset, append_time, throttle = struct.unpack_from(
        ">iihqqi", frame, 15
    )
    assert (partitions, index, error, offset) == (1, 0, ErrorCode.unsupported_version, -1)


def test_response_round_trips_through_kio() -> None:
    response = api_versions_response(HANDLERS, 3)
    encoded = encode_response(1, response)
    decoded, _ = entity_reader(type(response))(encoded, 8)
    assert decoded.api_keys == response.api_keys
    assert decoded.throttle_time == datetime.timedelta(0)
