"""The trio server: listeners, one task pair per connection, and periodic maintenance.

Per connection a reader task splits frames and decodes requests into a bounded channel and a
processor answers them one at a time, in order (pipelined requests queue in the channel,
like Kafka's one-in-flight-per-connection processing). A bad frame closes only its own
connection.

Each listener has a security protocol (kafkalite/security/): on SSL and SASL_SSL listeners
the connection first completes a TLS handshake, on SASL ones the SASL exchange
(security/sasl_authenticator.py), both within kafkalite.authentication.timeout.ms; a failure
costs one log line and that connection.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.acceptor import AcceptedConnection, Acceptors
from kafkalite.apis.api_versions import api_versions_response
from kafkalite.apis.base import ApiHandler, ChannelThrottle, RequestContext
from kafkalite.apis.quota_throttle import (
    exempt_from_request_quota,
    record_request_time,
    with_throttle_time,
)
from kafkalite.apis.registry import HANDLERS, api_names
from kafkalite.broker import log_maintenance
from kafkalite.broker.broker import Broker
from kafkalite.config import BrokerConfig, Listener
from kafkalite.metrics.counters import BrokerMetrics
from kafkalite.metrics.http import serve_metrics
from kafkalite.metrics.loop_time import LoopTime, timed
from kafkalite.protocol.codec import (
    DecodedRequest,
    LegacyRequest,
    UnsupportedApiVersions,
    decode_request,
    encode_response,
)
from kafkalite.protocol.errors import FrameError
from kafkalite.protocol.frames import FrameReader
from kafkalite.protocol.request_memory import ConnectionMemory, RequestMemoryPool
from kafkalite.security.listener_security import ListenerSecurity, listener_security
from kafkalite.security.principal import ANONYMOUS, KafkaPrincipal, ssl_principal
from kafkalite.security.reauthentication import Reauthentication
from kafkalite.security.sasl_authenticator import SaslServerAuthenticator, SaslState, Session
from kafkalite.security.ssl_principal_mapper import NoMatchingRule
from kafkalite.tls_stream import TLSStream

log = logging.getLogger("kafkalite.server")

MAX_QUEUED_REQUESTS = 16
MAINTENANCE_INTERVAL_S = 1.0
DELAYED_RELEASE_ROUND_MS = 10
# bytes: a response already encoded (an old version its API answers from the frame itself)
Queued = DecodedRequest | UnsupportedApiVersions | bytes


async def _read_requests(
    stream: trio.abc.Stream,
    peer: str,
    reader: FrameReader,
    handlers: Mapping[int, ApiHandler],
    queue: trio.MemorySendChannel[Queued],
    metrics: BrokerMetrics,
    memory: ConnectionMemory,
    throttle: ChannelThrottle,
) -> None:
    async with queue:
        while True:
            try:
                frame = reader.next_frame()
                if frame is None:
                    await memory.before_read(reader.frame_size)  # queued.max.request.bytes
                    if throttle.muted_until:  # a quota's throttling (KIP-219): read nothing
                        await _until_unmuted(throttle)
                    data = await stream.receive_some(reader.bytes_wanted)
                    if not data:
                        if reader.pending:
                            log.info("connection from %s closed mid-request", peer)
                        return
                    reader.feed(data)
                    metrics.network_bytes_in += len(data)
                    continue
                memory.frame_read(len(frame))
                request = decode_request(frame, handlers)
                if isinstance(request, LegacyRequest):
                    await queue.send(_answer_legacy(handlers[request.api_key], request))
                else:
                    await queue.send(request)
            except FrameError as exc:
                log.warning("closing connection from %s: %s", peer, exc)
                return


async def _until_unmuted(throttle: ChannelThrottle) -> None:
    while trio.current_time() < throttle.muted_until:
        await trio.sleep_until(throttle.muted_until)


def _answer_legacy(handler: ApiHandler, request: LegacyRequest) -> bytes:
    assert handler.legacy is not None  # legacy_below > 0 only with a legacy reader
    return handler.legacy(request.api_version, request.correlation_id, request.frame)


@dataclass(frozen=True, slots=True)
class Channel:
    """Who is at the other end of a connection, and on which listener (Kafka's KafkaChannel)."""

    peer: str
    client_host: str  # "/127.0.0.1", as Kafka reports it
    listener: str
    principal: KafkaPrincipal = ANONYMOUS
    reauthentication: Reauthentication | None = None  # SASL sessions (KIP-368)


async def _process(
    broker: Broker,
    stream: trio.abc.Stream,
    channel: Channel,
    handlers: Mapping[int, ApiHandler],
    queue: trio.MemoryReceiveChannel[Queued],
    memory: ConnectionMemory,
    throttle: ChannelThrottle,
    accepted: AcceptedConnection | None,
) -> None:
    metrics = broker.metrics
    async for item in memory.answering(queue):
        started = time.perf_counter()
        if accepted is not None:
            accepted.touch()
        if isinstance(item, bytes):
            await stream.send_all(item)
            continue
        if isinstance(item, UnsupportedApiVersions):
            response = api_versions_response(HANDLERS, 0, error=ErrorCode.unsupported_version)
            await stream.send_all(encode_response(item.correlation_id, response))
            continue
        if channel.reauthentication is not None:
            step = await _session_step(broker, stream, channel, channel.reauthentication, item)
            if step is _SessionStep.CLOSE:
                return
            if step is _SessionStep.ANSWERED:
                continue
        handler = handlers[item.api_key]
        ctx = RequestContext(
            broker,
            item.api_key,
            item.api_version,
            item.correlation_id,
            item.client_id,
            channel.client_host,
            channel.listener,
            channel.principal,
            channel.peer,
            broker.authorizer,
            item.size,
            throttle,
        )
        response = await _handled(broker, handler, ctx, item.body)
        if throttle.ms and response is not None:  # a quota was violated (KIP-219)
            response = with_throttle_time(response, throttle.ms)
        working = time.perf_counter()
        frame = None if response is None else encode_response(item.correlation_id, response)
        metrics.loop.handler_seconds += time.perf_counter() - working
        if frame is not None:
            await stream.send_all(frame)
            metrics.network_bytes_out += len(frame)
        elapsed = time.perf_counter() - started
        metrics.observe_request(broker, ctx.api_key, ctx.api_version, elapsed, item.body, response)
        if throttle.ms:
            await _mute(throttle)


async def _handled(broker: Broker, handler: ApiHandler, ctx: RequestContext, body: Any) -> Any:
    """The handler's answer. Its work (as a Kafka handler thread's; an async handler's steps,
    not its waits) counts for the idle percent and, with request quotas, against the client's
    request_percentage (Kafka's ClientRequestQuotaManager)."""
    loop = broker.metrics.loop
    quota = broker.quotas.request
    if not quota.enabled or exempt_from_request_quota(ctx.api_key, body):
        if handler.is_async:
            handling = handler.handle(ctx, body)
            return await (timed(handling, loop) if loop.enabled else handling)
        working = time.perf_counter()
        response = handler.handle(ctx, body)
        loop.handler_seconds += time.perf_counter() - working
        return response
    own = LoopTime()
    if handler.is_async:
        response = await timed(handler.handle(ctx, body), own)
    else:
        working = own.clock()
        response = handler.handle(ctx, body)
        own.handler_seconds += own.clock() - working
    loop.handler_seconds += own.handler_seconds
    if response is not None:  # acks=0 is exempt, as in Kafka
        record_request_time(ctx, quota, own.handler_seconds)
    return response


async def _mute(throttle: ChannelThrottle) -> None:
    """After a throttled answer: nothing read or served for its throttle time (KIP-219)."""
    throttle.muted_until = trio.current_time() + throttle.ms / 1000
    throttle.ms = 0
    await _until_unmuted(throttle)
    throttle.muted_until = 0.0


async def handle_connection(
    broker: Broker,
    stream: trio.SocketStream,
    pool: RequestMemoryPool | None = None,
    security: ListenerSecurity | None = None,
    accepted: AcceptedConnection | None = None,
) -> None:
    """Serve one connection; `accepted`: as counted by the listener's acceptor."""
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        host, port = "?", 0
    peer = f"{host}:{port}"
    connections = broker.quotas.connections
    if connections.enabled and await _throttled_connection(broker, stream, host, accepted):
        return
    config = broker.config
    most = connections.accepted(
        host,
        config.int("max.connections.per.ip"),
        config.str("max.connections.per.ip.overrides") or "",
    )
    if most is not None:
        log.info(
            "Rejected connection from %s, address already has the configured maximum of %d "
            "connections.",
            host,
            most,
        )
        await stream.aclose()
        return
    security = security or _plaintext(broker)
    channel = Channel(peer, f"/{host}", security.name)
    reader = FrameReader(broker.config.int("socket.request.max.bytes"))
    send, receive = trio.open_memory_channel[Queued](MAX_QUEUED_REQUESTS)
    memory = (pool or RequestMemoryPool(-1)).connection()
    throttle = ChannelThrottle()
    broker.metrics.connections += 1
    broker.metrics.connections_created += 1
    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(stream)
            secured = await _secure(broker, stream, channel, reader, security)
            if secured is None:
                return
            channel, transport = secured
            broker.metrics.successful_authentications += 1
            if transport is not stream:
                await stack.enter_async_context(transport)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    _read_requests,
                    transport,
                    peer,
                    reader,
                    HANDLERS,
                    send,
                    broker.metrics,
                    memory,
                    throttle,
                )
                await _process(
                    broker, transport, channel, HANDLERS, receive, memory, throttle, accepted
                )
                nursery.cancel_scope.cancel()
    # The nursery wraps whatever its tasks raise in an ExceptionGroup.
    except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        log.debug("connection from %s dropped", peer)
    except* Exception:
        log.exception("closing connection from %s after an internal error", peer)
    finally:
        memory.close()
        connections.closed(host)
        broker.metrics.connections -= 1
        if broker.share_groups is not None:  # its share sessions end with it (as Kafka's)
            broker.share_groups.partitions.connection_closed(peer)


async def _throttled_connection(
    broker: Broker, stream: trio.SocketStream, host: str, accepted: AcceptedConnection | None
) -> bool:
    """Over its IP's connection_creation_rate, a connection is held unanswered for the
    throttle time, then closed (Kafka's acceptor's delayed close); meanwhile it is not
    counted against max.connections."""
    listener = "" if accepted is None else accepted.listener
    now_ms = broker.clock_ms()
    throttle_ms = broker.quotas.connections.record_connection(host, now_ms, listener)
    if not throttle_ms:
        return False
    if accepted is not None:
        accepted.release()
    log.debug("delaying the close of a connection from %s for %d ms", host, throttle_ms)
    async with stream:
        await trio.sleep(throttle_ms / 1000)
    return True


class _SessionStep(enum.Enum):
    SERVE = enum.auto()  # on to the request's handler
    ANSWERED = enum.auto()  # part of a re-authentication, answered
    CLOSE = enum.auto()  # the session ended, or re-authenticating failed


async def _session_step(
    broker: Broker,
    stream: trio.abc.Stream,
    channel: Channel,
    reauthentication: Reauthentication,
    request: DecodedRequest,
) -> _SessionStep:
    """What a SASL session (KIP-368) makes of a request, before any handler sees it."""
    if not reauthentication.takes(request):  # a handshake may renew even an ended session
        if reauthentication.expired:
            log.debug("closing %s on %s: its SASL session ended", channel.peer, channel.listener)
            return _SessionStep.CLOSE
        return _SessionStep.SERVE
    renewals = reauthentication.renewals
    response = reauthentication.receive(request)
    if response is not None:
        await stream.send_all(response)
    broker.metrics.successful_reauthentications += reauthentication.renewals - renewals
    failed = reauthentication.failed
    if failed is None:
        return _SessionStep.ANSWERED
    broker.metrics.failed_reauthentications += 1
    log.info(
        "Failed re-authentication with %s on %s (%s)",
        channel.peer,
        channel.listener,
        failed.failure,
    )
    if failed.delay_close:
        await trio.sleep(failed.settings.failed_delay_ms / 1000)
    return _SessionStep.CLOSE


def _plaintext(broker: Broker) -> ListenerSecurity:
    return ListenerSecurity(broker.advertised_listener.name, "PLAINTEXT")


async def _secure(
    broker: Broker,
    stream: trio.SocketStream,
    channel: Channel,
    reader: FrameReader,
    security: ListenerSecurity,
) -> tuple[Channel, trio.abc.Stream] | None:
    """TLS handshake and SASL exchange as the listener's protocol asks, within the
    authentication timeout: the channel with its principal and the stream to serve, or None
    when the connection is to be closed (after one log line, Kafka's Selector's)."""
    secured: tuple[Channel, trio.abc.Stream] | None = (channel, stream)
    with trio.move_on_after(security.timeout_s) as deadline:
        if security.ssl_context is not None:
            secured = await _tls_handshake(broker, stream, channel, security)
        if secured is not None and security.sasl is not None:
            channel, transport = secured
            session = await _sasl_authenticate(broker, transport, channel, reader, security)
            secured = (
                (_authenticated(broker, channel, security, session), transport) if session else None
            )
    if deadline.cancelled_caught:
        _failed(broker, channel, f"not authenticated within {security.timeout_s * 1000:.0f} ms")
        return None
    return secured


async def _tls_handshake(
    broker: Broker, stream: trio.SocketStream, channel: Channel, security: ListenerSecurity
) -> tuple[Channel, trio.abc.Stream] | None:
    assert security.ssl_context is not None
    tls = TLSStream(stream, security.ssl_context)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        _failed(broker, channel, f"SSL handshake failed: {exc.__cause__ or exc}")
        return None
    try:
        principal = ssl_principal(tls.getpeercert(), security.principal_mapper)
    except NoMatchingRule as exc:
        _failed(broker, channel, str(exc))
        return None
    return replace(channel, principal=principal), tls


def _authenticated(
    broker: Broker, channel: Channel, security: ListenerSecurity, session: Session
) -> Channel:
    reauthentication = Reauthentication(
        session, functools.partial(_authenticator, broker, security), broker.clock_ms
    )
    return replace(channel, principal=session.principal, reauthentication=reauthentication)


def _failed(broker: Broker, channel: Channel, reason: str) -> None:
    broker.metrics.failed_authentications += 1
    log.info("Failed authentication with %s on %s (%s)", channel.peer, channel.listener, reason)


def _authenticator(
    broker: Broker, security: ListenerSecurity, previous: Session | None = None
) -> SaslServerAuthenticator:
    assert security.sasl is not None
    return SaslServerAuthenticator(
        security.sasl,
        HANDLERS,
        lambda version, error: api_versions_response(HANDLERS, version, error),
        broker.scram_credential,
        broker.clock_ms,
        previous,
    )


async def _sasl_authenticate(
    broker: Broker,
    stream: trio.abc.Stream,
    channel: Channel,
    reader: FrameReader,
    security: ListenerSecurity,
) -> Session | None:
    """Run the SASL state machine until it completes (the session) or fails (None, after
    connection.failed.authentication.delay.ms when Kafka delays)."""
    authenticator = _authenticator(broker, security)
    served_max = reader.max_frame_bytes
    reader.max_frame_bytes = security.sasl.max_receive_size
    while authenticator.state not in (SaslState.COMPLETE, SaslState.FAILED):
        try:
            frame = reader.next_frame()
        except FrameError:
            authenticator.fail_oversized(reader.frame_size)
            break
        if frame is None:
            data = await stream.receive_some(reader.bytes_wanted)
            if not data:
                return None
            reader.feed(data)
            broker.metrics.network_bytes_in += len(data)
            continue
        response = authenticator.receive(frame)
        if response is not None:
            await stream.send_all(response)
            broker.metrics.network_bytes_out += len(response)
    reader.max_frame_bytes = served_max
    if authenticator.session is not None:
        return authenticator.session
    _failed(broker, channel, authenticator.failure)
    if authenticator.delay_close:
        await trio.sleep(security.sasl.failed_delay_ms / 1000)
    return None


async def _maintenance(broker: Broker) -> None:
    """Flush policy and checkpoints every second; retention and cleaning on their intervals;
    the disk-heavy parts on worker threads (broker/log_maintenance.py).

    A failing round is logged, never fatal: the broker keeps serving its clients."""
    config = broker.config
    retention_every = config.int("log.retention.check.interval.ms") / 1000
    cleaning_every = config.int("log.cleaner.backoff.ms") / 1000
    next_retention = trio.current_time() + retention_every
    next_cleaning = trio.current_time() + cleaning_every
    while True:
        await trio.sleep(MAINTENANCE_INTERVAL_S)
        now = trio.current_time()
        retention_due = now >= next_retention
        cleaning_due = config.bool("log.cleaner.enable") and now >= next_cleaning
        if retention_due:
            next_retention = now + retention_every
        if cleaning_due:  # log.cleaner.backoff.ms is a dynamic broker config
            next_cleaning = now + broker.config.int("log.cleaner.backoff.ms") / 1000
        try:
            await log_maintenance.maintain(broker.replica_manager, retention_due, cleaning_due)
        except Exception:
            log.exception("periodic maintenance failed")


async def _release_delayed(broker: Broker) -> None:
    """Delayed delivery's timer: wakes when the next held record is due, and at least every
    kafkalite.delayed.delivery.precision.ms (a record held meanwhile may be due earlier),
    so a record is readable at most that long after its due time. Rounds are at least
    DELAYED_RELEASE_ROUND_MS apart (or the precision, if smaller): records due close together
    are released together, not in a round each."""
    manager = broker.replica_manager
    while True:
        precision = broker.config.int("kafkalite.delayed.delivery.precision.ms")
        due = manager.delayed_delivery.next_due_ms()
        gap = min(DELAYED_RELEASE_ROUND_MS, precision)
        wait = precision if due is None else min(max(due - broker.clock_ms(), gap), precision)
        await trio.sleep(wait / 1000)
        try:
            manager.release_delayed()
        except Exception:
            log.exception("releasing delayed records failed")
            await trio.sleep(precision / 1000)


async def _isr_expiration(broker: Broker) -> None:
    """Kafka's isr-expiration task: every half of replica.lag.time.max.ms."""
    while True:
        await trio.sleep(broker.config.int("replica.lag.time.max.ms") / 2000)
        broker.replica_manager.maybe_shrink_isrs()


@dataclass(frozen=True, slots=True)
class ListenerSocket:
    """A listening socket, the listener it belongs to and that listener's security."""

    listener: Listener
    socket_listener: trio.SocketListener
    security: ListenerSecurity

    @property
    def socket(self) -> trio.socket.SocketType:
        return self.socket_listener.socket


async def open_listeners(config: BrokerConfig) -> list[ListenerSocket]:
    """Bind every listener (ConfigError when a listener's security cannot be set up)."""
    securities = {lst.name: listener_security(config, lst.name) for lst in config.listeners}
    listeners: list[ListenerSocket] = []
    for listener in config.listeners:
        host = listener.host or None
        for socket_listener in await trio.open_tcp_listeners(listener.port, host=host):
            listeners.append(ListenerSocket(listener, socket_listener, securities[listener.name]))
    return listeners


def bound_config(config: BrokerConfig, listeners: list[ListenerSocket]) -> BrokerConfig:
    """Advertise the real ports of listeners that asked for port 0 (tests use that)."""
    bound = {each.listener.name: each.socket.getsockname()[1] for each in listeners}
    if all(lst.port != 0 for lst in config.listeners):
        return config
    advertised = [
        Listener(a.name, a.host, bound.get(a.name, a.port) if a.port == 0 else a.port)
        for a in config.advertised_listeners
    ]
    raw = dict(config.raw)
    raw["advertised.listeners"] = ",".join(f"{a.name}://{a.host}:{a.port}" for a in advertised)
    return replace(config, raw=raw)


class _NoSignals:
    """Stands in for a signal receiver where none can be opened (a broker in a thread)."""

    def __aiter__(self) -> _NoSignals:
        return self

    async def __anext__(self) -> int:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


_NO_SIGNALS = _NoSignals()


async def serve(
    broker: Broker,
    listeners: list[ListenerSocket],
    metrics_listeners: list[trio.SocketListener] | None = None,
    *,
    handle_signals: bool = True,
    tasks: Sequence[Callable[..., Awaitable[None]]] = (),
    before_shutdown: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled or (handle_signals: the main thread only) SIGTERM/SIGINT; the
    caller shuts the broker down after.

    With `metrics_listeners`, Prometheus /metrics, /health and /ready are served there;
    `tasks` (a cluster member's metadata watches and controller candidacy) run alongside, each
    started before the listeners serve. `before_shutdown` (a cluster member's controlled
    shutdown) runs on the first signal while everything still serves; a second signal cuts it
    short."""
    receiver = (
        trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT)
        if handle_signals
        else contextlib.nullcontext(_NO_SIGNALS)
    )
    # The loop's idle time feeds only the served metrics: without them nobody pays for it.
    timing = _instrumented(broker.metrics.loop) if metrics_listeners else contextlib.nullcontext()
    with receiver as signals, timing:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_maintenance, broker)
            for task in tasks:
                await nursery.start(task)
            nursery.start_soon(_isr_expiration, broker)
            nursery.start_soon(_release_delayed, broker)
            if broker.fetchers is not None:
                await nursery.start(broker.fetchers.run)
            if broker.release_forwarder is not None:
                await nursery.start(broker.release_forwarder.run)
            if broker.remote_log_manager is not None:
                if broker.remote_log_manager.metadata_manager is not None:
                    await nursery.start(broker.remote_log_manager.metadata_manager.run)
                await nursery.start(broker.remote_log_manager.run)
            await nursery.start(broker.groups.run)
            if broker.txn is not None:
                await nursery.start(broker.txn.run)
            if broker.share_groups is not None:
                await nursery.start(broker.share_groups.partitions.coordinator.run)
                await nursery.start(broker.share_groups.partitions.run)
                await nursery.start(broker.share_groups.run)
            pool = RequestMemoryPool(broker.config.int("queued.max.request.bytes"))
            acceptors = Acceptors(broker.quotas.connections, broker.clock_ms)
            for each in listeners:
                handler = functools.partial(_accepted, broker, pool, each.security)
                await nursery.start(
                    acceptors.serve, each.listener.name, each.socket_listener, handler
                )
            if metrics_listeners:
                from kafkalite.metrics.registry import Exposition  # imports prometheus_client

                exposition = Exposition(broker, api_names(HANDLERS))
                await nursery.start(serve_metrics, metrics_listeners, exposition, broker.metrics)
            broker.metrics.ready = True
            task_status.started()
            async for signum in signals:
                broker.metrics.ready = False
                log.info("received %s, shutting down", signal.Signals(signum).name)
                if before_shutdown is not None:
                    await _until_next_signal(before_shutdown, signals)
                nursery.cancel_scope.cancel()
                break


async def _accepted(
    broker: Broker,
    pool: RequestMemoryPool,
    security: ListenerSecurity,
    stream: trio.SocketStream,
    accepted: AcceptedConnection,
) -> None:
    await handle_connection(broker, stream, pool, security, accepted)


@contextlib.contextmanager
def _instrumented(loop: LoopTime) -> Iterator[None]:
    """`loop` on this trio loop while serving (the waits for I/O; handlers timed step by
    step from now on)."""
    trio.lowlevel.add_instrument(loop)
    loop.enabled = True
    try:
        yield
    finally:
        loop.enabled = False
        with contextlib.suppress(KeyError):  # trio drops an instrument that raised
            trio.lowlevel.remove_instrument(loop)


async def _until_next_signal(
    work: Callable[[], Awaitable[object]], signals: AsyncIterator[int]
) -> None:
    async with trio.open_nursery() as nursery:

        async def next_signal() -> None:
            async for signum in signals:
                log.info("received %s again: stopping now", signal.Signals(signum).name)
                break
            nursery.cancel_scope.cancel()

        nursery.start_soon(next_signal)
        await work()
        nursery.cancel_scope.cancel()
