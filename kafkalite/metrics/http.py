"""`/metrics`, `/health` and `/ready` over HTTP/1.1, served by a trio task on the broker's loop.

Why not prometheus-client's own thread server: the collector reads broker state (logs,
groups, offsets) that only the trio thread mutates; collecting on the loop reads it
consistently without locks on the hot path (the text is then rendered in a worker thread,
see registry.py). One request per connection (`Connection: close`), bounded head size and time.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.metrics.counters import BrokerMetrics

if TYPE_CHECKING:  # prometheus_client loads only when metrics are served (faster start)
    from kafkalite.metrics.registry import Exposition

log = logging.getLogger("kafkalite.metrics")

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 10.0


async def open_metrics_listeners(config: BrokerConfig) -> list[trio.SocketListener]:
    """Bind kafkalite.metrics.host:kafkalite.metrics.port; none when the port is -1."""
    port = config.int("kafkalite.metrics.port")
    if port < 0:
        return []
    host = config.str("kafkalite.metrics.host") or None
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen for metrics on {host or '*'}:{port}: {exc.strerror or exc}"
        ) from None


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


async def answer(request_line: str, exposition: Exposition, metrics: BrokerMetrics) -> bytes:
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response("400 Bad Request", b"bad request\n")
    method, target = parts[0], parts[1].split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return _response("405 Method Not Allowed", b"GET only\n")
    if target == "/metrics":
        families = exposition.collect()
        body = await trio.to_thread.run_sync(exposition.render, families)
        return _response("200 OK", body, exposition.content_type)
    if target == "/health":
        return _response("200 OK", b"ok\n")
    if target == "/ready":
        if metrics.ready:
            return _response("200 OK", b"ready\n")
        return _response("503 Service Unavailable", b"not ready\n")
    return _response("404 Not Found", b"try /metrics, /health or /ready\n")


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    head = b""
    with trio.move_on_after(READ_TIMEOUT_S):
        while b"\r\n\r\n" not in head and len(head) <= MAX_HEAD_BYTES:
            data = await stream.receive_some(4096)
            if not data:
                break
            head += data
        return head
    return None


async def _handle(
    stream: trio.SocketStream, exposition: Exposition, metrics: BrokerMetrics
) -> None:
    try:
        async with stream:
            head = await _read_head(stream)
            if not head:
                return
            if b"\r\n\r\n" not in head:
                await stream.send_all(_response("431 Request Header Fields Too Large", b""))
                return
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            response = await answer(request_line, exposition, metrics)
            if request_line.startswith("HEAD "):
                response = response.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
            await stream.send_all(response)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except Exception:
        log.exception("metrics request failed")


async def serve_metrics(
    listeners: list[trio.SocketListener],
    exposition: Exposition,
    metrics: BrokerMetrics,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    host, port = listeners[0].socket.getsockname()[:2]
    log.info("metrics on http://%s:%d/metrics (also /health, /ready)", host, port)
    await trio.serve_listeners(
        lambda stream: _handle(stream, exposition, metrics), listeners, task_status=task_status
    )
