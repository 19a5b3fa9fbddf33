"""Sans-IO harness for API handlers: requests built from kio, responses checked on the wire."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import trio
from crc32c import crc32c
from kio.index import load_payload_module
from kio.serial import entity_reader
from kio.static.constants import EntityType

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.protocol.codec import encode_response


def request_module(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def roundtrip(response: Any, correlation_id: int = 11) -> Any:
    """Encode the response as a frame and read it back, checking the wire codec both ways."""
    frame = encode_response(correlation_id, response)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    (got_correlation,) = struct.unpack_from(">i", frame, 4)
    assert got_correlation == correlation_id
    body = frame[8 + (1 if response.__header_schema__.__version__ >= 1 else 0) :]
    decoded, consumed = entity_reader(type(response))(body, 0)
    assert consumed == len(body)
    return decoded


def run_handler(api: ApiHandler, ctx: RequestContext, request: Any) -> Any:
    """The handler's answer; an async handler runs in a trio run of its own."""
    if not api.is_async:
        return api.handle(ctx, request)

    async def answer() -> Any:
        return await api.handle(ctx, request)

    return trio.run(answer)


def call(broker: Broker, api: ApiHandler, version: int, build: Callable[[Any], Any]) -> Any:
    """Run the handler on the request `build(request_module)` returns; checks the round trip."""
    request = build(request_module(api.api_key, version))
    ctx = RequestContext(broker, api.api_key, version, correlation_id=11, client_id="tests")
    response = run_handler(api, ctx, request)
    assert type(response).__version__ == version
    assert roundtrip(response) == response
    return response


# -- record batches ----------------------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _record(offset_delta: int, value: bytes) -> bytes:
    body = (
        b"\x00"
        + _zigzag(0)
        + _zigzag(offset_delta)
        + _zigzag(-1)
        + _zigzag(len(value))
        + value
        + _zigzag(0)
    )
    return _zigzag(len(body)) + body


def record_batch(
    values: list[bytes], timestamp: int = 1_700_000_000_000, attributes: int = 0
) -> bytes:
    """A magic v2 batch of uncompressed key-less records, as a plain producer sends it."""
    records = b"".join(_record(i, v) for i, v in enumerate(values))
    after_crc = (
        struct.pack(
            ">hiqqqhii", attributes, len(values) - 1, timestamp, timestamp, -1, -1, -1, len(values)
        )
        + records
    )
    crc = crc32c(after_crc)
    buf = io.BytesIO()
    buf.write(struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2))
    buf.write(struct.pack(">I", crc))
    buf.write(after_crc)
    return buf.getvalue()
