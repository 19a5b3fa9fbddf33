"""The server's TLSStream (kafkalite/tls_stream.py) against a stdlib TLS client, over trio's
in-memory streams: records coalesced per receive, close_notify, half-close, ragged EOF,
failed handshakes."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from kafkalite.tls_stream import TLSStream
from tests.security.conftest import Pki


class Client:
    """A TLS client on a stdlib SSLObject; it can send close_notify and keep reading."""

    def __init__(self, transport: trio.abc.Stream, context: ssl.SSLContext) -> None:
        self.transport = transport
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")

    async def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            await self.flush()
            if done:
                return
            await self.refill()

    async def flush(self) -> None:
        data = self.outgoing.read()
        if data:
            await self.transport.send_all(data)

    async def refill(self) -> None:
        data = await self.transport.receive_some()
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()

    async def send(self, data: bytes) -> None:
        self.tls.write(data)
        await self.flush()

    async def send_close_notify(self) -> None:
        with pytest.raises(ssl.SSLWantReadError):  # sent; the server's not awaited
            self.tls.unwrap()
        await self.flush()

    async def receive(self, size: int) -> bytes:
        """Exactly `size` bytes; fewer only at the server's close_notify."""
        data = b""
        while len(data) < size:
            try:
                chunk = self.tls.read(size - len(data))
            except ssl.SSLWantReadError:
                await self.refill()
                continue
            except ssl.SSLZeroReturnError:  # close_notify after its own
                break
            if not chunk:
                break
            data += chunk
        return data


def contexts(pki: Pki) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(pki.keystore_file)
    return server, ssl.create_default_context(cafile=str(pki.ca_file))


Body = Callable[[TLSStream, Client], Awaitable[None]]


def connected(pki: Pki, server_side: Body, client_side: Body) -> None:
    """Both ends handshake, then run their parts concurrently."""
    server_context, client_context = contexts(pki)

    async def main() -> None:
        left, right = trio.testing.memory_stream_pair()
        server, client = TLSStream(left, server_context), Client(right, client_context)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.do_handshake)
                await client.handshake()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server_side, server, client)
                await client_side(server, client)

    trio.run(main)


async def _nothing(server: TLSStream, client: Client) -> None:
    pass


def test_one_receive_takes_every_buffered_record(pki: Pki) -> None:
    received: list[int] = []

    async def client_side(server: TLSStream, client: Client) -> None:
        for _ in range(20):  # 20 records of 1,000 bytes, all sent before the server reads
            await client.send(b"x" * 1000)
        received.append(len(await server.receive_some(1 << 20)))

    connected(pki, _nothing, client_side)
    assert received == [20_000]  # trio's SSLStream: 1,000 (one record)


def test_receive_stops_at_max_bytes_and_keeps_the_rest(pki: Pki) -> None:
    async def client_side(server: TLSStream, client: Client) -> None:
        await client.send(b"a" * 3000)
        await client.send(b"b" * 3000)
        assert await server.receive_some(4000) == b"a" * 3000 + b"b" * 1000
        assert await server.receive_some(4000) == b"b" * 2000

    connected(pki, _nothing, client_side)


def test_close_notify_is_eof_and_the_server_still_answers(pki: Pki) -> None:
    """A half-closed client: its request, its close_notify, then it reads the answer."""

    async def client_side(server: TLSStream, client: Client) -> None:
        await client.send(b"request")
        await client.send_close_notify()
        assert await server.receive_some(100) == b"request"
        assert await server.receive_some(100) == b""
        assert await server.receive_some(100) == b""  # and stays at EOF
        await server.send_all(b"answer")
        assert await client.receive(6) == b"answer"
        await server.aclose()
        assert await client.receive(1) == b""  # the server's close_notify

    connected(pki, _nothing, client_side)


def test_eof_without_close_notify_is_a_broken_stream(pki: Pki) -> None:
    async def client_side(server: TLSStream, client: Client) -> None:
        await client.send(b"partial")
        await client.transport.aclose()
        assert await server.receive_some(100) == b"partial"
        with pytest.raises(trio.BrokenResourceError) as raised:
            await server.receive_some(100)
        assert isinstance(raised.value.__cause__, ssl.SSLEOFError)
        await server.aclose()

    connected(pki, _nothing, client_side)


def test_a_corrupt_record_after_good_ones_fails_after_their_data(pki: Pki) -> None:
    async def client_side(server: TLSStream, client: Client) -> None:
        await client.send(b"good")
        await client.transport.send_all(b"\x17\x03\x03\x00\x20" + b"\x00" * 32)  # bad MAC
        assert await server.receive_some(100) == b"good"
        with pytest.raises(trio.BrokenResourceError) as raised:
            await server.receive_some(100)
        assert isinstance(raised.value.__cause__, ssl.SSLError)
        with pytest.raises(trio.BrokenResourceError):
            await server.send_all(b"answer")
        await server.aclose()

    connected(pki, _nothing, client_side)


def test_aclose_sends_close_notify_then_closes_the_transport(pki: Pki) -> None:
    async def client_side(server: TLSStream, client: Client) -> None:
        await server.send_all(b"bye")
        await server.aclose()
        assert await client.receive(10) == b"bye"
        with pytest.raises(trio.ClosedResourceError):
            await server.receive_some(1)
        await server.aclose()  # again: nothing

    connected(pki, _nothing, client_side)


def test_concurrent_reader_and_writer(pki: Pki) -> None:
    """The server's reader and processor tasks: records both ways at once, each in order."""
    rounds = 200

    async def echo(server: TLSStream, client: Client) -> None:
        send, receive = trio.open_memory_channel[bytes](rounds)

        async def reader() -> None:
            buffered = b""
            async with send:
                for _ in range(rounds):
                    while len(buffered) < 4:
                        buffered += await server.receive_some(1 << 16)
                    await send.send(buffered[:4])
                    buffered = buffered[4:]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            async for number in receive:
                await server.send_all(number)

    async def client_side(server: TLSStream, client: Client) -> None:
        async with trio.open_nursery() as nursery:

            async def sender() -> None:
                for index in range(rounds):
                    await client.send(b"%04d" % index)
                    await trio.lowlevel.checkpoint()

            nursery.start_soon(sender)
            answers = await client.receive(4 * rounds)
        assert answers == b"".join(b"%04d" % index for index in range(rounds))

    connected(pki, echo, client_side)


def test_a_refused_certificate_fails_the_handshake(pki: Pki) -> None:
    server_context, _ = contexts(pki)
    untrusting = ssl.create_default_context()  # the system CAs, not the test CA

    async def main() -> None:
        left, right = trio.testing.memory_stream_pair()
        server, client = TLSStream(left, server_context), Client(right, untrusting)
        failures: list[BaseException] = []

        async def serve() -> None:
            try:
                await server.do_handshake()
            except trio.BrokenResourceError as exc:
                failures.append(exc)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve)
                with pytest.raises(ssl.SSLCertVerificationError):
                    await client.handshake()
                await client.transport.aclose()
        assert len(failures) == 1
        assert isinstance(failures[0].__cause__, ssl.SSLError)
        with pytest.raises(trio.BrokenResourceError):
            await server.receive_some(1)
        await server.aclose()

    trio.run(main)
