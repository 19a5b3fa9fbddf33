"""Where the event loop's time goes: waiting for I/O, and running request handlers.

Kafka has network threads (idle while they wait in select: NetworkProcessorAvgIdlePercent)
and request handler threads (idle while no request waits: RequestHandlerAvgIdlePercent).
kafkalite has one trio loop doing both, so both are measured on it:
* idle for I/O: a trio instrument times each wait for I/O (`before_io_wait`/`after_io_wait`,
  called once per round of the scheduler, not per task or request);
* busy in handlers: the server times each request's handler call and response encoding (the
  work a Kafka handler thread does); an async handler is timed step by step (`timed`), so its
  waits (a long-poll fetch, acks=all) are not counted as work, as Kafka parks them in purgatory.
`IdleWindow` turns the cumulative seconds into the idle shares over the last minute.
"""

from __future__ import annotations

import time
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

T = TypeVar("T")
WINDOW_S = 60.0  # the shares cover at least the last minute (Kafka samples 2 x 30 s)
SNAPSHOT_EVERY_S = 5.0


class LoopTime(trio.abc.Instrument):
    """Cumulative seconds, on the loop it is added to (`trio.lowlevel.add_instrument`)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock  # seconds (tests pass a clock they advance)
        self.io_wait_seconds = 0.0
        self.handler_seconds = 0.0
        self._wait_from = 0.0
        self.enabled = False  # on the loop (while the metrics are served): handlers timed

    def before_io_wait(self, timeout: float) -> None:
        self._wait_from = self.clock()

    def after_io_wait(self, timeout: float) -> None:
        self.io_wait_seconds += self.clock() - self._wait_from


@types.coroutine
def timed(coro: Coroutine[Any, Any, T], loop: LoopTime) -> Generator[Any, Any, T]:
    """`await timed(handler(...), loop)` runs the handler as `await` would, adding the time of
    each of its steps (not of its waits) to the handlers' seconds."""
    value: Any = None
    error: BaseException | None = None
    while True:
        start = loop.clock()
        try:
            yielded = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as done:
            return done.value
        finally:
            loop.handler_seconds += loop.clock() - start
        value, error = None, None
        try:
            value = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # thrown in while the handler waits: thrown into it
            error = exc


@dataclass
class Snapshot:
    at: float
    io_wait_seconds: float
    handler_seconds: float


@dataclass
class IdleWindow:
    """Idle shares since the newest snapshot at least WINDOW_S old (or since this window was
    made, with the metrics endpoint); snapshots are taken at scrapes, so any number of
    scrapers see the same window."""

    loop: LoopTime
    snapshots: deque[Snapshot] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.snapshots.append(self._now(time.perf_counter()))

    def _now(self, now: float) -> Snapshot:
        return Snapshot(now, self.loop.io_wait_seconds, self.loop.handler_seconds)

    def shares(self, now: float | None = None) -> tuple[float, float]:
        """(network idle, request handler idle), each 0..1."""
        now = time.perf_counter() if now is None else now
        current = self._now(now)
        while len(self.snapshots) > 1 and self.snapshots[1].at <= now - WINDOW_S:
            self.snapshots.popleft()
        first = self.snapshots[0]
        if now - self.snapshots[-1].at >= SNAPSHOT_EVERY_S:
            self.snapshots.append(current)
        wall = now - first.at
        if wall <= 0:
            return 1.0, 1.0
        io_wait = (current.io_wait_seconds - first.io_wait_seconds) / wall
        handlers = (current.handler_seconds - first.handler_seconds) / wall
        return _share(io_wait), _share(1.0 - handlers)


def _share(value: float) -> float:
    return min(max(value, 0.0), 1.0)
