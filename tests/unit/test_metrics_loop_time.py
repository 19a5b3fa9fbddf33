"""The event loop's idle and handler time (kafkalite/metrics/loop_time.py), on a clock the
tests advance (no wall-clock bounds), and the window the idle shares cover."""

from __future__ import annotations

import pytest
import trio

from kafkalite.metrics.loop_time import WINDOW_S, IdleWindow, LoopTime, timed


class FakeClock:
    """Seconds that pass only when a test says so: no wall-clock bounds to flake under load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_wait_for_io_adds_its_duration() -> None:
    clock = FakeClock()
    loop = LoopTime(clock)
    loop.before_io_wait(1.0)
    clock.now += 0.3
    loop.after_io_wait(1.0)
    clock.now += 5.0  # work between waits: not idle
    loop.before_io_wait(0.0)
    loop.after_io_wait(0.0)
    assert loop.io_wait_seconds == 0.3


def test_trio_calls_the_instrument_around_its_waits() -> None:
    calls: list[str] = []

    class Recording(LoopTime):
        def before_io_wait(self, timeout: float) -> None:
            calls.append("before")

        def after_io_wait(self, timeout: float) -> None:
            calls.append("after")

    async def main() -> None:
        trio.lowlevel.add_instrument(Recording())
        await trio.sleep(0.01)  # the loop waits in epoll for the timer

    trio.run(main)
    assert calls[:2] == ["before", "after"] and len(calls) % 2 == 0


def test_an_async_handler_is_timed_by_its_steps_not_its_waits() -> None:
    clock = FakeClock()
    loop = LoopTime(clock)

    async def handler(parked: trio.Event) -> str:
        clock.now += 0.05  # work before the wait
        await parked.wait()  # a long-poll fetch parked: not handler work
        clock.now += 0.07  # work after it
        return "answer"

    async def main() -> str:
        parked = trio.Event()
        async with trio.open_nursery() as nursery:

            async def wake() -> None:
                clock.now += 10.0  # the wait
                parked.set()

            nursery.start_soon(wake)
            return await timed(handler(parked), loop)

    assert trio.run(main) == "answer"
    assert loop.handler_seconds == pytest.approx(0.12)


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
