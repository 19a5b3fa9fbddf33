"""Sans-IO request/response framing over kio: frame bytes in, typed requests out, and back.

A frame is the request without its 4-byte size prefix. Errors that Kafka answers by closing
the connection (unknown API key, unsupported version of anything but ApiVersions, a body that
does not parse, a length the frame cannot hold, a null the schema forbids) raise FrameError;
the server logs the reason and closes. The codec knows the served APIs only through the
`ServedApi` protocol: the API layer imports the protocol layer, never the other way round.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from kafkalite.protocol.errors import FrameError
from kafkalite.protocol.guard import check_request

API_VERSIONS_KEY = 18
_HEADER_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class ServedApi(Protocol):
    """What the codec needs to know of an API the broker serves (kafkalite.apis' ApiHandler)."""

    @property
    def legacy_below(self) -> int:
        """Versions below this one have no kio schema: their frame goes to the API as is."""
        ...

    def accepts(self, version: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    size: int = 0  # the frame's bytes (Kafka's request.sizeInBytes: what producer quotas count)


@dataclass(frozen=True, slots=True)
class UnsupportedApiVersions:
    """An ApiVersions request of a version we do not know: answered in v0 with an error."""

    correlation_id: int


@dataclass(frozen=True, slots=True)
class LegacyRequest:
    """A request of a version kio has no schema for: its API reads the frame itself."""

    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes


@cache
def _readers(api_key: int, version: int) -> tuple[Any, Any]:
    schema = load_request_schema(api_key, version)
    return entity_reader(schema.__header_schema__), entity_reader(schema)


def decode_request(
    frame: bytes, served: Mapping[int, ServedApi]
) -> DecodedRequest | UnsupportedApiVersions | LegacyRequest:
    if len(frame) < _HEADER_PREFIX.size:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, version, correlation_id = _HEADER_PREFIX.unpack_from(frame)
    api = served.get(api_key)
    if api is None:
        raise FrameError(f"unknown or unsupported API key {api_key}")
    if not api.accepts(version):
        if api_key == API_VERSIONS_KEY:
            return UnsupportedApiVersions(correlation_id)
        raise FrameError(f"unsupported version {version} of API key {api_key}")
    if version < api.legacy_below:
        return LegacyRequest(api_key, version, correlation_id, frame)
    read_header, read_body = _readers(api_key, version)
    try:
        check_request(frame, api_key, version)  # before kio's reader trusts any length
        header, consumed = read_header(frame, 0)
        body, _ = read_body(frame, consumed)
    except FrameError as exc:
        raise FrameError(f"malformed request (API key {api_key} v{version}): {exc}") from None
    except Exception as exc:  # kio raises several types for malformed input
        raise FrameError(
            f"malformed request (API key {api_key} v{version}): {type(exc).__name__}: {exc}"
        ) from None
    return DecodedRequest(api_key, version, correlation_id, header.client_id, body, len(frame))


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def encode_response(correlation_id: int, response: Any) -> memoryview:
    """Size-prefixed response frame: header v0 or v1 as the response class says, then body."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(_SIZE.pack(correlation_id))
    if response.__header_schema__.__version__ >= 1:
        buf.write(b"\0")  # empty tagged fields of response header v1
    response_class: type = type(response)
    _writer(response_class)(buf, response)
    data = buf.getbuffer()  # sent as is: copying a multi-MiB fetch response costs ~30%
    _SIZE.pack_into(data, 0, len(data) - 4)
    return data.toreadonly()
