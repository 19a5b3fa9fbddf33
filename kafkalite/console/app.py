"""The console's HTTP side: the static page and a JSON API over `Cluster`.

Endpoints are plain functions: Starlette runs them in its thread pool, so the blocking
confluent-kafka calls never stall the event loop.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kafkalite.console.cluster import Cluster, ClusterError

STATIC = Path(__file__).parent / "static"


class BadRequest(ClusterError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 400)


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}") from None


def _cursor(raw: str) -> dict[int, int] | None:
    """A page cursor, "partition:offset,...", as `next` gave it."""
    if not raw:
        return None
    try:
        return {int(p): int(o) for p, o in (item.split(":") for item in raw.split(","))}
    except ValueError:
        raise BadRequest(f"cursor must be partition:offset,..., got {raw!r}") from None


def _cursor_text(cursor: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(cursor.items()))


def _time_ms(raw: str) -> int:
    """An ISO time ("2026-11-24T10:00", UTC unless it names a zone) or epoch milliseconds."""
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        moment = datetime.datetime.fromisoformat(raw)
    except ValueError:
        raise BadRequest(f"time must be ISO 8601 or epoch ms, got {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest("the request body must be JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _reset_value(to: str, body: dict[str, Any]) -> int | None:
    """The number a reset needs: an offset, a time ("time": ISO or epoch ms) or a shift."""
    raw = body.get({"datetime": "time", "shift": "by"}.get(to, "offset"))
    if raw in (None, ""):
        return None
    if to == "datetime":
        return _time_ms(str(raw))
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise BadRequest(f"reset to {to} needs an integer, got {raw!r}") from None


def _bytes(part: Any) -> bytes | None:
    """A key, value or header as the API shows them: null, text, or {"base64": ...}."""
    if part is None:
        return None
    if isinstance(part, dict) and "base64" in part:
        return base64.b64decode(str(part["base64"]), validate=True)
    if isinstance(part, str):
        return part.encode("utf-8")
    raise ValueError(f"expected text, null or {{base64: ...}}, got {part!r}")


def build_app(cluster: Cluster) -> Starlette:
    def api(handler: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(handler(request))
            except ClusterError as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status)

        return endpoint

    def messages(request: Request) -> Any:
        mode = request.query_params.get("mode", "latest")
        partition_raw = request.query_params.get("partition", "all")
        partition = None if partition_raw in ("", "all") else _int(request, "partition")
        limit = _int(request, "limit", 20) or 20
        offset = _int(request, "offset", 0) if mode == "offset" else None
        timestamp = None
        if mode == "time":
            timestamp = _time_ms(request.query_params.get("time", ""))
        elif mode not in ("latest", "offset"):
            raise BadRequest(f"mode must be latest, offset or time, got {mode!r}")
        order = request.query_params.get("order", "oldest")
        if order not in ("newest", "oldest"):
            raise BadRequest(f"order must be newest or oldest, got {order!r}")
        topic = request.path_params["name"]
        contains = request.query_params.get("contains", "")
        cursor = _cursor(request.query_params.get("cursor", ""))
        page = cluster.page(
            topic, partition, limit, offset, timestamp, contains, order == "newest", cursor
        )
        following = page["next"]
        page["next"] = None if following is None else _cursor_text(following)
        return page

    async def create_topic(request: Request) -> Response:
        body = await _json_body(request)
        name = str(body.get("name", "")).strip()
        try:
            partitions = int(body.get("partitions", 1))
            replication = int(body.get("replication_factor", 1))
        except (TypeError, ValueError):
            return JSONResponse({"error": "partitions and replication must be integers"}, 400)
        configs = {str(k): str(v) for k, v in (body.get("configs") or {}).items()}
        if not name:
            return JSONResponse({"error": "a topic needs a name"}, 400)
        return await _in_thread(
            lambda: cluster.create_topic(name, partitions, replication, configs)
        )

    async def produce(request: Request) -> Response:
        body = await _json_body(request)
        partition = body.get("partition")
        try:
            headers = [(str(name), _bytes(value)) for name, value in body.get("headers") or []]
            key, value = _bytes(body.get("key")), _bytes(body.get("value"))
            index = None if partition in (None, "", "any") else int(partition)
        except (TypeError, ValueError, binascii.Error) as exc:
            return JSONResponse({"error": f"bad message: {exc}"}, 400)
        topic = request.path_params["name"]
        return await _in_thread(lambda: cluster.produce(topic, index, key, value, headers))

    async def alter_configs(request: Request) -> Response:
        body = await _json_body(request)
        set_ = {str(k): str(v) for k, v in (body.get("set") or {}).items()}
        delete = [str(k) for k in body.get("delete") or []]
        if not set_ and not delete:
            return JSONResponse({"error": "nothing to set or delete"}, 400)
        name = request.path_params["name"]
        return await _in_thread(lambda: cluster.alter_topic_configs(name, set_, delete))

    async def reset_offsets(request: Request) -> Response:
        body = await _json_body(request)
        group_id = request.path_params["group"]
        to = str(body.get("to", ""))
        try:
            value = _reset_value(to, body)
        except ClusterError as exc:
            return JSONResponse({"error": str(exc)}, exc.status)
        topic = str(body.get("topic", ""))
        return await _in_thread(lambda: cluster.reset_offsets(group_id, topic, to, value))

    async def _in_thread(call: Callable[[], Any]) -> Response:
        try:
            result = await run_in_threadpool(call)
        except ClusterError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(result if result is not None else {"ok": True})

    def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    def favicon(request: Request) -> Response:  # asked for by browsers whatever the page links
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    routes = [
        Route("/", index),
        Route("/favicon.ico", favicon),
        Route("/api/cluster", api(lambda r: cluster.overview())),
        Route("/api/topics", api(lambda r: cluster.topics()), methods=["GET"]),
        Route("/api/topics", create_topic, methods=["POST"]),
        Route("/api/topics/{name}", api(lambda r: cluster.topic(r.path_params["name"]))),
        Route(
            "/api/topics/{name}",
            api(lambda r: cluster.delete_topic(r.path_params["name"]) or {"ok": True}),
            methods=["DELETE"],
        ),
        Route("/api/topics/{name}/messages", api(messages), methods=["GET"]),
        Route("/api/topics/{name}/messages", produce, methods=["POST"]),
        Route("/api/topics/{name}/configs", alter_configs, methods=["POST"]),
        Route("/api/groups", api(lambda r: cluster.groups())),
        Route("/api/groups/{group}", api(lambda r: cluster.group(r.path_params["group"]))),
        Route(
            "/api/groups/{group}",
            api(lambda r: cluster.delete_group(r.path_params["group"]) or {"ok": True}),
            methods=["DELETE"],
        ),
        Route("/api/groups/{group}/reset-offsets", reset_offsets, methods=["POST"]),
        Route("/api/throughput", api(lambda r: cluster.throughput_sample())),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes)
