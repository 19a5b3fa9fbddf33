"""A bound on the bytes of requests read but not yet answered, across all connections.

Kafka's `queued.max.request.bytes` memory pool: when a frame's size header has been read,
the connection reserves the whole frame; while the pool is used up, connections wait before
starting a new frame (their sockets are not read, so TCP pushes back on the clients). The
bound is not strict, as in Kafka: a reservation succeeds while anything is left, so a frame
once started always completes and use stays below the bound plus one largest frame.
A frame's reservation is returned when its request has been answered. Frames of at most
SMALL_FRAME bytes are counted but never held back, so metadata, heartbeats and probes still
flow while large unfinished requests hold the pool (a departure from Kafka, which mutes all).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

SIZE_PREFIX = 4
SMALL_FRAME = 64 << 10
T = TypeVar("T")


@dataclass(eq=False)
class RequestMemoryPool:
    limit: int  # bytes; -1 or 0: unbounded
    used: int = 0
    _freed: trio.Event = field(default_factory=trio.Event)

    @property
    def exhausted(self) -> bool:
        return self.limit > 0 and self.used >= self.limit

    async def acquire(self, nbytes: int) -> None:
        while self.exhausted:
            await self._freed.wait()
        self.used += nbytes

    def release(self, nbytes: int) -> None:
        if nbytes:
            self.used -= nbytes
            self._freed.set()
            self._freed = trio.Event()

    def connection(self) -> ConnectionMemory:
        return ConnectionMemory(self)


@dataclass(eq=False)
class ConnectionMemory:
    """One connection's reservations: the frame being read, then the frames queued in order."""

    pool: RequestMemoryPool
    reading: int = 0
    queued: deque[int] = field(default_factory=deque)

    async def before_read(self, frame_size: int | None) -> None:
        """Reserve the frame whose size header is buffered, waiting while the pool is used up."""
        if frame_size is not None and frame_size > SMALL_FRAME and not self.reading:
            await self.pool.acquire(frame_size + SIZE_PREFIX)
            self.reading = frame_size + SIZE_PREFIX

    def frame_read(self, frame_size: int) -> None:
        """A whole frame was taken out; frames already buffered whole are counted now."""
        nbytes = self.reading or frame_size + SIZE_PREFIX
        if not self.reading:
            self.pool.used += nbytes
        self.reading = 0
        self.queued.append(nbytes)

    def answered(self) -> None:
        if self.queued:
            self.pool.release(self.queued.popleft())

    def answering(self, queue: AsyncIterator[T]) -> AsyncIterator[T]:
        """Iterate the queued requests; each one's bytes return to the pool when the
        processor asks for the next (it has answered this one by then)."""
        return _Answering(queue, self)

    def close(self) -> None:
        self.pool.release(self.reading + sum(self.queued))
        self.reading = 0
        self.queued.clear()


class _Answering(Generic[T]):
    def __init__(self, queue: AsyncIterator[T], memory: ConnectionMemory) -> None:
        self._queue = queue
        self._memory = memory
        self._started = False

    def __aiter__(self) -> _Answering[T]:
        return self

    async def __anext__(self) -> T:
        if self._started:
            self._memory.answered()
        self._started = True
        return await self._queue.__anext__()
