"""The event loop's idle and handler time (kafkalite/metrics/loop_time.py): real waits on a
trio loop, and the window the idle shares cover."""

from __future__ import annotations

import time

import pytest
import trio

from kafkalite.metrics.loop_time import WINDOW_S, IdleWindow, LoopTime, timed


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_waits_for_io_count_as_idle_and_work_does_not() -> None:
    loop = LoopTime()

    async def main() -> None:
        trio.lowlevel.add_instrument(loop)
        busy(0.2)
        await trio.sleep(0.3)  # the loop waits in epoll for the timer

    trio.run(main)
    assert 0.25 <= loop.io_wait_seconds < 0.5


def test_an_async_handler_is_timed_by_its_steps_not_its_waits() -> None:
    loop = LoopTime()

    async def handler() -> str:
        busy(0.05)
        await trio.sleep(0.3)  # a long-poll fetch parked: not handler work
        busy(0.05)
        return "answer"

    async def main() -> str:
        return await timed(handler(), loop)

    assert trio.run(main) == "answer"
    assert 0.1 <= loop.handler_seconds < 0.3


def test_a_cancelled_handler_is_cancelled_through_the_timer() -> None:
    loop = LoopTime()
    cleaned_up = []

    async def handler() -> None:
        try:
            await trio.sleep_forever()
        finally:
            cleaned_up.append(True)

    async def main() -> None:
        with trio.move_on_after(0.05):
            await timed(handler(), loop)

    trio.run(main)
    assert cleaned_up == [True]


def test_handler_errors_reach_the_caller() -> None:
    async def handler() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("bad request")

    async def main() -> None:
        await timed(handler(), LoopTime())

    with pytest.raises(ValueError, match="bad request"):
        trio.run(main)


def test_shares_cover_the_last_minute_whoever_scrapes() -> None:
    loop = LoopTime()
    window = IdleWindow(loop)
    start = window.snapshots[0].at
    loop.io_wait_seconds, loop.handler_seconds = 6.0, 2.0
    assert window.shares(start + 10) == pytest.approx((0.6, 0.8))
    # A minute later: only what happened since the newest snapshot a minute old counts.
    loop.io_wait_seconds, loop.handler_seconds = 6.0 + 30.0, 2.0 + 30.0
    assert window.shares(start + 10 + WINDOW_S) == pytest.approx((0.5, 0.5))
    assert window.shares(start + 10 + WINDOW_S) == pytest.approx((0.5, 0.5))  # a 2nd scraper
    assert [s.at - start for s in window.snapshots] == [10, 10 + WINDOW_S]
