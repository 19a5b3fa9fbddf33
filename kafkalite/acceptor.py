"""Kafka's Acceptor on trio: one accept loop per listening socket, in place of
trio.serve_listeners, so that the connection quotas (broker/connection_quotas.py) can hold a
listener back as Kafka's acceptor thread is held in ConnectionQuotas.inc: a connection over
`max.connection.creation.rate` is taken in only after its throttle time, one at
`max.connections` only once a connection has closed; meanwhile that listener accepts nothing
more (further clients wait in the socket's backlog). A connection the protected inter-broker
listener takes over the broker-wide bound makes another listener close its least recently
active connection (Kafka's Processor.closeExcessConnections)."""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from kafkalite.broker.connection_quotas import ConnectionQuotas

log = logging.getLogger("kafkalite.server")

# accept() errors that concern one connection (or a passing shortage): go on accepting,
# as trio.serve_listeners does
_ACCEPT_CAPACITY_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_ACCEPT_BACKOFF_S = 0.1


@dataclass(eq=False)
class AcceptedConnection:
    """A connection counted against its listener's and the broker's `max.connections`."""

    listener: str
    quotas: ConnectionQuotas
    cancel_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    last_active: float = 0.0
    released: bool = False

    def touch(self) -> None:
        """A request came in (Kafka's least recently used order)."""
        self.last_active = trio.current_time()

    def release(self) -> None:
        """No longer counted (closed, or held only to be closed); once."""
        if not self.released:
            self.released = True
            self.quotas.dec(self.listener)


Handler = Callable[[trio.SocketStream, AcceptedConnection], Awaitable[None]]


class Acceptors:
    """The accept loops of every listener of a broker, sharing its connection quotas."""

    def __init__(self, quotas: ConnectionQuotas, clock_ms: Callable[[], int]) -> None:
        self.quotas = quotas
        self.clock_ms = clock_ms
        self._slot_freed = trio.Event()
        self._live: dict[str, dict[AcceptedConnection, None]] = {}
        quotas.on_change = self._wake

    def _wake(self) -> None:
        self._slot_freed.set()
        self._slot_freed = trio.Event()

    async def serve(
        self,
        listener: str,
        socket_listener: trio.SocketListener,
        handler: Handler,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with socket_listener, trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await self._accept(socket_listener)
                if stream is None:
                    continue
                try:
                    connection = await self._take_in(listener, stream)
                except BaseException:  # shutting down while it was held
                    stream.socket.close()
                    raise
                nursery.start_soon(self._run, handler, stream, connection)

    async def _accept(self, socket_listener: trio.SocketListener) -> trio.SocketStream | None:
        try:
            return await socket_listener.accept()
        except OSError as exc:
            if exc.errno not in _ACCEPT_CAPACITY_ERRORS:
                raise
            log.error("accept failed (%s): retrying in %.1f s", exc, _ACCEPT_BACKOFF_S)
            await trio.sleep(_ACCEPT_BACKOFF_S)
            return None

    async def _take_in(self, listener: str, stream: trio.SocketStream) -> AcceptedConnection:
        """Kafka's ConnectionQuotas.waitForConnectionSlot: the creation rates' throttle time,
        then a free slot; this listener accepts nothing meanwhile."""
        started_ms = self.clock_ms()
        throttle_ms = self.quotas.record_accept(listener, started_ms)
        blocked = throttle_ms > 0
        if throttle_ms:
            log.debug("delaying a connection on %s for %d ms", listener, throttle_ms)
            await trio.sleep(throttle_ms / 1000)
        while not self.quotas.slot_available(listener):
            blocked = True
            await self._slot_freed.wait()
        if blocked:  # Kafka's AcceptorBlockedPercent
            now_ms = self.clock_ms()
            self.quotas.record_blocked(listener, now_ms - started_ms, now_ms)
        self.quotas.inc(listener)
        connection = AcceptedConnection(listener, self.quotas, last_active=trio.current_time())
        self._live.setdefault(listener, {})[connection] = None
        self._close_excess_connections()
        return connection

    async def _run(
        self, handler: Handler, stream: trio.SocketStream, connection: AcceptedConnection
    ) -> None:
        try:
            with connection.cancel_scope:
                await handler(stream, connection)
        finally:
            del self._live[connection.listener][connection]
            connection.release()
            stream.socket.close()  # closed already, unless cancelled before the handler

    def _close_excess_connections(self) -> None:
        """Over the broker-wide bound (the protected listener took one more): each other
        listener, while still over it, closes its least recently active connection (Kafka's
        processors, one each per poll)."""
        for listener, live in self._live.items():
            if not self.quotas.max_connections_exceeded(listener):
                continue
            open_ones = [c for c in live if not c.cancel_scope.cancel_called]
            if open_ones:
                lru = min(open_ones, key=lambda c: c.last_active)
                log.info("closing a connection on %s: over max.connections", listener)
                lru.cancel_scope.cancel()
                lru.release()
