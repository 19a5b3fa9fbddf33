"""TLS over a trio stream with the stdlib's ssl.SSLObject and memory BIOs: the server's
SSLStream.

trio's SSLStream decrypts one TLS record per receive_some and passes the event loop once per
call. Clients write small records (librdkafka's are about 2 KiB: one per slice of its
request buffer), so a 1 MB ProduceRequest took ~450 receive_some calls and loop passes;
under TLS the broker spent 5x the CPU per produced MB it spends in plaintext. Here one
receive_some decrypts every record already received, up to max_bytes.

Semantics as trio's SSLStream with https_compatible=False: an EOF without close_notify is a
BrokenResourceError, a close_notify an EOF (b""); aclose sends close_notify without waiting
for the peer's; the server's TLS 1.3 session tickets go out with its first write. The
reader and the writer may be two tasks: each drains the outgoing BIO right after its SSLObject
call and sends under one FIFO lock, so records leave in the order OpenSSL made them (a read
can make some: the answer to a TLS 1.3 KeyUpdate).
"""

from __future__ import annotations

import enum
import ssl
from typing import cast

import trio

RECEIVE_SIZE = 65536  # bytes asked of the socket per receive, at least
MAX_RECEIVE_SIZE = 1 << 20
MAX_RECORD = 16384 + 256  # a TLS record's plaintext and its overhead


class _State(enum.Enum):
    HANDSHAKING = enum.auto()
    OK = enum.auto()
    BROKEN = enum.auto()
    CLOSED = enum.auto()


class TLSStream(trio.abc.Stream):
    """A TLS connection on `transport_stream`; do_handshake() before anything else."""

    def __init__(
        self,
        transport_stream: trio.abc.Stream,
        context: ssl.SSLContext,
        *,
        server_side: bool = True,
        server_hostname: str | None = None,
    ) -> None:
        self.transport_stream = transport_stream
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.ssl_object = context.wrap_bio(
            self._incoming,
            self._outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
        )
        self._state = _State.HANDSHAKING
        self._delayed = b""  # the server's TLS 1.3 session tickets, sent with its first write
        self._send_lock = trio.StrictFIFOLock()
        self._receive_error: BaseException | None = None

    def getpeercert(self) -> dict[str, object] | None:
        return self.ssl_object.getpeercert()  # type: ignore[return-value]

    async def do_handshake(self) -> None:
        """The TLS handshake; BrokenResourceError (from the ssl error) when it fails."""
        while True:
            try:
                self.ssl_object.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            except (ssl.SSLError, ssl.CertificateError) as exc:
                self._state = _State.BROKEN
                raise trio.BrokenResourceError from exc
            if done and self.ssl_object.server_side and self.ssl_object.version() == "TLSv1.3":
                # Tickets right after the handshake can reach a client that is not reading
                # yet (OpenSSL issues 7948 and 7967): they wait for the first write.
                self._delayed = self._outgoing.read()
            else:
                await self._flush()
            if done:
                self._state = _State.OK
                return
            await self._refill()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """Every decrypted byte available (at most max_bytes), waiting for the socket only
        when no whole record is buffered; b"" after the peer's close_notify."""
        self._check_open()
        wanted = RECEIVE_SIZE if max_bytes is None else max_bytes
        if wanted < 1:
            raise ValueError("max_bytes must be >= 1")
        waited = False
        while True:
            data = self._decrypt(wanted)
            if self._outgoing.pending:  # e.g. the answer to a KeyUpdate
                await self._flush()
            if data is not None:
                if not waited:  # a checkpoint per call, as trio's streams are
                    await trio.lowlevel.checkpoint()
                return data
            await self._refill(wanted)
            waited = True

    def _decrypt(self, wanted: int) -> bytearray | None:
        """The records buffered so far, decrypted; None when none is whole yet; b"" at the
        peer's close_notify. A failure after some data is raised at the next call."""
        if self._receive_error is not None:
            self._state = _State.BROKEN
            raise trio.BrokenResourceError from self._receive_error
        # Plaintext is never longer than its ciphertext: what the BIO holds, what OpenSSL
        # holds decrypted, and at most one record OpenSSL has begun to read.
        available = self._incoming.pending + self.ssl_object.pending() + MAX_RECORD
        buffer = bytearray(min(wanted, available))
        filled = 0
        with memoryview(buffer) as view:
            try:
                while filled < len(buffer):
                    count = cast(int, self.ssl_object.read(len(buffer) - filled, view[filled:]))
                    if not count:  # close_notify
                        break
                    filled += count
            except ssl.SSLWantReadError:
                if not filled:
                    return None
            except ssl.SSLZeroReturnError:  # close_notify, as the stdlib says it at times
                pass
            except (ssl.SSLError, ssl.CertificateError) as exc:
                if not filled:
                    self._state = _State.BROKEN
                    raise trio.BrokenResourceError from exc
                # For the next call, after this data; without its traceback, whose frames
                # hold views of the buffer.
                self._receive_error = exc.with_traceback(None)
        del buffer[filled:]
        return buffer

    async def _refill(self, wanted: int = RECEIVE_SIZE) -> None:
        """Ciphertext from the socket: what the reader wants, with TLS's overhead, when more
        than RECEIVE_SIZE (a large frame's rest in few receives)."""
        size = max(RECEIVE_SIZE, min(wanted + wanted // 64, MAX_RECEIVE_SIZE))
        data = await self.transport_stream.receive_some(size)
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self._check_open()
        if not data:  # SSLObject.write(b"") would mean EOF
            await trio.lowlevel.checkpoint()
            return
        try:
            self.ssl_object.write(data)  # memory BIOs take all of it
        except (ssl.SSLError, ssl.CertificateError) as exc:
            self._state = _State.BROKEN
            raise trio.BrokenResourceError from exc
        await self._flush()

    async def _flush(self) -> None:
        """Send what the outgoing BIO holds. Taken from the BIO before the first await, so
        the FIFO lock keeps the order OpenSSL wrote it in."""
        data = self._delayed + self._outgoing.read() if self._delayed else self._outgoing.read()
        self._delayed = b""
        if not data:
            return
        try:
            async with self._send_lock:
                await self.transport_stream.send_all(data)
        except BaseException:
            self._state = _State.BROKEN  # an unknown part of it went out
            raise

    async def wait_send_all_might_not_block(self) -> None:
        async with self._send_lock:
            await self.transport_stream.wait_send_all_might_not_block()

    def _check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise trio.ClosedResourceError
        if self._state is _State.BROKEN:
            raise trio.BrokenResourceError

    async def aclose(self) -> None:
        """Send close_notify (not waiting for the peer's) and close the transport."""
        if self._state is _State.CLOSED:
            await trio.lowlevel.checkpoint()
            return
        if self._state is not _State.OK:
            self._state = _State.CLOSED
            await self.transport_stream.aclose()
            return
        try:
            try:
                self.ssl_object.unwrap()  # queues close_notify
            except ssl.SSLError:  # SSLWantReadError: the peer's close_notify is not awaited
                pass
            try:
                await self._flush()
            except (trio.BrokenResourceError, trio.BusyResourceError):
                pass  # the peer may have closed first
        except BaseException:
            await trio.aclose_forcefully(self.transport_stream)
            raise
        else:
            await self.transport_stream.aclose()
        finally:
            self._state = _State.CLOSED
