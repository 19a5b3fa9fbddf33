"""The trio server: listeners, one task pair per connection, and periodic maintenance.

Per connection a reader task splits frames and decodes requests into a bounded channel and a
processor answers them one at a time, in order (pipelined requests queue in the channel,
like Kafka's one-in-flight-per-connection processing). A bad frame closes only its own
connection.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis.api_versions import api_versions_response
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.registry import HANDLERS, api_names
from kafkalite.broker import log_maintenance
from kafkalite.broker.broker import Broker
from kafkalite.config import BrokerConfig, Listener
from kafkalite.metrics.counters import BrokerMetrics
from kafkalite.metrics.http import serve_metrics
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

log = logging.getLogger("kafkalite.server")

MAX_QUEUED_REQUESTS = 16
MAINTENANCE_INTERVAL_S = 1.0
# bytes: a response already encoded (an old version its API answers from the frame itself)
Queued = DecodedRequest | UnsupportedApiVersions | bytes


async def _read_requests(
    stream: trio.SocketStream,
    peer: str,
    max_frame_bytes: int,
    handlers: Mapping[int, ApiHandler],
    queue: trio.MemorySendChannel[Queued],
    metrics: BrokerMetrics,
    memory: ConnectionMemory,
) -> None:
    reader = FrameReader(max_frame_bytes)
    async with queue:
        while True:
            try:
                frame = reader.next_frame()
                if frame is None:
                    await memory.before_read(reader.frame_size)  # queued.max.request.bytes
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


def _answer_legacy(handler: ApiHandler, request: LegacyRequest) -> bytes:
    assert handler.legacy is not None  # legacy_below > 0 only with a legacy reader
    return handler.legacy(request.api_version, request.correlation_id, request.frame)


async def _process(
    broker: Broker,
    stream: trio.SocketStream,
    client_host: str,
    handlers: Mapping[int, ApiHandler],
    queue: trio.MemoryReceiveChannel[Queued],
    memory: ConnectionMemory,
    connection_id: str = "",
) -> None:
    metrics = broker.metrics
    async for item in memory.answering(queue):
        started = time.perf_counter()
        if isinstance(item, bytes):
            await stream.send_all(item)
            continue
        if isinstance(item, UnsupportedApiVersions):
            response = api_versions_response(HANDLERS, 0, error=ErrorCode.unsupported_version)
            await stream.send_all(encode_response(item.correlation_id, response))
            continue
        handler = handlers[item.api_key]
        ctx = RequestContext(
            broker,
            item.api_key,
            item.api_version,
            item.correlation_id,
            item.client_id,
            client_host,
            connection_id,
        )
        if handler.is_async:
            response = await handler.handle(ctx, item.body)
        else:
            response = handler.handle(ctx, item.body)
        if response is not None:
            frame = encode_response(item.correlation_id, response)
            await stream.send_all(frame)
            metrics.network_bytes_out += len(frame)
        elapsed = time.perf_counter() - started
        metrics.observe_request(broker, ctx.api_key, ctx.api_version, elapsed, item.body, response)


async def handle_connection(
    broker: Broker, stream: trio.SocketStream, pool: RequestMemoryPool | None = None
) -> None:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        host, port = "?", 0
    peer = f"{host}:{port}"
    max_frame = broker.config.int("socket.request.max.bytes")
    send, receive = trio.open_memory_channel[Queued](MAX_QUEUED_REQUESTS)
    memory = (pool or RequestMemoryPool(-1)).connection()
    broker.metrics.connections += 1
    broker.metrics.connections_created += 1
    try:
        async with stream, trio.open_nursery() as nursery:
            nursery.start_soon(
                _read_requests, stream, peer, max_frame, HANDLERS, send, broker.metrics, memory
            )
            await _process(broker, stream, f"/{host}", HANDLERS, receive, memory, peer)
            nursery.cancel_scope.cancel()
    # The nursery wraps whatever its tasks raise in an ExceptionGroup.
    except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        log.debug("connection from %s dropped", peer)
    except* Exception:
        log.exception("closing connection from %s after an internal error", peer)
    finally:
        memory.close()
        broker.metrics.connections -= 1
        if broker.share_groups is not None:  # its share sessions end with it (as Kafka's)
            broker.share_groups.partitions.connection_closed(peer)


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


async def _isr_expiration(broker: Broker) -> None:
    """Kafka's isr-expiration task: every half of replica.lag.time.max.ms."""
    while True:
        await trio.sleep(broker.config.int("replica.lag.time.max.ms") / 2000)
        broker.replica_manager.maybe_shrink_isrs()


async def open_listeners(config: BrokerConfig) -> list[trio.SocketListener]:
    listeners: list[trio.SocketListener] = []
    for listener in config.listeners:
        host = listener.host or None
        listeners.extend(await trio.open_tcp_listeners(listener.port, host=host))
    return listeners


def bound_config(config: BrokerConfig, listeners: list[trio.SocketListener]) -> BrokerConfig:
    """Advertise the real port when a listener asked for port 0 (tests use that)."""
    configured = config.listeners[0]
    if configured.port != 0:
        return config
    port = listeners[0].socket.getsockname()[1]
    advertised = config.advertised_listeners[0]
    real = Listener(advertised.name, advertised.host, port)
    raw = dict(config.raw)
    raw["advertised.listeners"] = f"{real.name}://{real.host}:{real.port}"
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
    listeners: list[trio.SocketListener],
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
    with receiver as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_maintenance, broker)
            for task in tasks:
                await nursery.start(task)
            nursery.start_soon(_isr_expiration, broker)
            if broker.fetchers is not None:
                await nursery.start(broker.fetchers.run)
            await nursery.start(broker.groups.run)
            if broker.txn is not None:
                await nursery.start(broker.txn.run)
            if broker.share_groups is not None:
                await nursery.start(broker.share_groups.partitions.coordinator.run)
                await nursery.start(broker.share_groups.partitions.run)
                await nursery.start(broker.share_groups.run)
            pool = RequestMemoryPool(broker.config.int("queued.max.request.bytes"))
            await nursery.start(
                trio.serve_listeners, lambda s: handle_connection(broker, s, pool), listeners
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
