"""A Kafka protocol client connection on trio, for one broker talking to another (the
replica fetcher): kio entities in, kio entities out, one request in flight at a time.

On a secured inter-broker listener (security/inter_broker.py) the connection first shakes
hands in TLS (SSL, SASL_SSL: the other broker's certificate and host name checked), then logs
in with the broker's own credentials (SASL_PLAINTEXT, SASL_SSL; security/sasl_client.py):
SaslHandshake v1, then SaslAuthenticate v2 rounds.

Framing as Kafka's: a 4-byte size, the request header the request class names, the body;
responses split by the sans-IO FrameReader and decoded with the matching response class.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import trio
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.serial import entity_reader, entity_writer

from kafkalite.protocol.frames import FrameReader
from kafkalite.security.inter_broker import InterBrokerSecurity
from kafkalite.security.sasl_client import SaslClientError, SaslLogin

if TYPE_CHECKING:
    from kafkalite.broker.cluster_metadata import Endpoint

MAX_RESPONSE_BYTES = 2**31 - 1
RECEIVE_CHUNK = 1 << 20


class ConnectionLost(Exception):
    """The peer closed the connection, or it failed."""


class AuthenticationFailed(ConnectionLost):
    """The peer refused this broker's SASL login (its credentials or mechanism), or its TLS
    handshake (its certificate, or this broker's)."""


async def _handshake(stream: trio.SSLStream[trio.abc.Stream]) -> None:
    try:
        await stream.do_handshake()
    except trio.BrokenResourceError as exc:
        raise AuthenticationFailed(f"TLS handshake: {exc.__cause__ or exc}") from exc


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


def encode_request(request: Any, correlation_id: int, client_id: str) -> bytes:
    """The size-prefixed frame for a kio request entity."""
    header_cls = type(request).__header_schema__
    header = header_cls(
        request_api_key=type(request).__api_key__,
        request_api_version=type(request).__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _writer(header_cls)(buf, header)
    request_cls: type = type(request)
    _writer(request_cls)(buf, request)
    data = buf.getbuffer()
    data[:4] = (len(data) - 4).to_bytes(4, "big")
    return bytes(data)


def decode_response(frame: bytes, response_cls: Any) -> tuple[int, Any]:
    """(correlation id, response entity) of a response frame without its size."""
    header, header_size = _reader(response_cls.__header_schema__)(frame, 0)
    body, _ = _reader(response_cls)(frame, header_size)
    return header.correlation_id, body


class BrokerConnection:
    """One connection to a broker; `request` sends and waits for the matching response."""

    def __init__(self, stream: trio.abc.Stream, client_id: str) -> None:
        self._stream = stream
        self._client_id = client_id
        self._frames = FrameReader(MAX_RESPONSE_BYTES)
        self._correlation = itertools.count(1)

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        client_id: str,
        security: InterBrokerSecurity | None = None,
    ) -> BrokerConnection:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {exc}") from exc
        return await cls.over(stream, client_id, security, host)

    @classmethod
    async def over(
        cls,
        stream: trio.abc.Stream,
        client_id: str,
        security: InterBrokerSecurity | None,
        host: str,
    ) -> BrokerConnection:
        """A connection on an open TCP stream to `host`, in TLS and logged in as `security`
        says (closed if either fails)."""
        try:
            if security is not None and security.ssl_context is not None:
                stream = trio.SSLStream(stream, security.ssl_context, server_hostname=host)
                await _handshake(stream)
            connection = cls(stream, client_id)
            if security is not None and security.login is not None:
                await connection.authenticate(security.login)
        except BaseException:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise
        return connection

    async def authenticate(self, login: SaslLogin) -> None:
        """Kafka's SaslClientAuthenticator: the handshake names the mechanism, then tokens
        go back and forth until the client has nothing more to say."""
        handshake = await self.request(SaslHandshakeRequest(mechanism=login.mechanism))
        if handshake.error_code != ErrorCode.none:
            raise AuthenticationFailed(
                f"SASL handshake for {login.mechanism}: {handshake.error_code.name.upper()}"
                f" (the listener enables {', '.join(handshake.mechanisms)})"
            )
        client = login.client()
        token: bytes | None = client.first()
        while token is not None:
            answer = await self.request(SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code != ErrorCode.none:
                raise AuthenticationFailed(
                    f"SASL {login.mechanism} login as {login.username}:"
                    f" {answer.error_code.name.upper()}: {answer.error_message}"
                )
            try:
                token = client.respond(answer.auth_bytes)
            except SaslClientError as exc:
                raise AuthenticationFailed(str(exc)) from exc

    async def request(self, request: Any) -> Any:
        correlation_id = next(self._correlation)
        try:
            await self._stream.send_all(encode_request(request, correlation_id, self._client_id))
            frame = await self._next_frame()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise ConnectionLost(str(exc)) from exc
        response_cls = load_response_schema(type(request).__api_key__, type(request).__version__)
        got, response = decode_response(frame, response_cls)
        if got != correlation_id:
            raise ConnectionLost(f"correlation id {got}, expected {correlation_id}")
        return response

    async def _next_frame(self) -> bytes:
        while (frame := self._frames.next_frame()) is None:
            data = await self._stream.receive_some(RECEIVE_CHUNK)
            if not data:
                raise ConnectionLost("connection closed by the peer")
            self._frames.feed(bytes(data))
        return bytes(frame)

    async def aclose(self) -> None:
        await self._stream.aclose()


@dataclass(eq=False)
class BrokerConnections:
    """One connection per other broker, opened on first use and dropped after a failure
    (the next `get` reconnects, to the broker's endpoint as registered then)."""

    endpoint_of: Callable[[int], Endpoint | None]
    client_id: str
    security: InterBrokerSecurity | None = None  # TLS, SASL login to the other brokers
    _open: dict[int, BrokerConnection] = field(default_factory=dict)

    async def get(self, broker_id: int) -> BrokerConnection:
        connection = self._open.get(broker_id)
        if connection is None:
            endpoint = self.endpoint_of(broker_id)
            if endpoint is None:
                raise ConnectionLost(f"broker {broker_id} is not registered")
            connection = await BrokerConnection.open(
                endpoint.host, endpoint.port, self.client_id, self.security
            )
            self._open[broker_id] = connection
        return connection

    async def drop(self, broker_id: int) -> None:
        connection = self._open.pop(broker_id, None)
        if connection is not None:
            with trio.CancelScope(shield=True):
                await connection.aclose()

    async def close_all(self) -> None:
        for broker_id in list(self._open):
            await self.drop(broker_id)
