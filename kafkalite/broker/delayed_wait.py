"""The trio side of delayed operations: wait for one to complete, or expire it on time.

Everything else about them (when they complete, what they answer) is sans-IO, in
broker/delayed.py.
"""

from __future__ import annotations

import trio

from kafkalite.broker.delayed import DelayedOperation, Purgatory


async def complete_or_expire(
    purgatory: Purgatory, operation: DelayedOperation, timeout_ms: int
) -> None:
    """Park `operation` until it completes or `timeout_ms` passes (then it is expired).

    A cancelled waiter (its connection closed) leaves nothing parked behind it.
    """
    if purgatory.try_complete_else_watch(operation):
        return
    done = trio.Event()
    operation.waker = done.set
    try:
        with trio.move_on_after(max(timeout_ms, 0) / 1000):
            await done.wait()
        if not operation.completed:
            purgatory.expire(operation)
    finally:
        purgatory.cancel(operation)
