"""The keyed timer table: replace, cancel, earliest-first popping."""

from __future__ import annotations

from kafkalite.coordinator.timers import Timer, TimerKind, Timers, heartbeat_key, join_key


def hb(deadline: int, member: str, group: str = "g") -> Timer:
    return Timer(deadline, TimerKind.HEARTBEAT, group, member)


def test_pop_due_in_deadline_then_schedule_order():
    timers = Timers()
    timers.schedule(hb(30, "c"))
    timers.schedule(hb(10, "a"))
    timers.schedule(hb(10, "b"))
    assert timers.next_deadline() == 10
    assert timers.pop_due(9) is None
    assert [timers.pop_due(30).member_id for _ in range(3)] == ["a", "b", "c"]
    assert timers.pop_due(1000) is None
    assert timers.next_deadline() is None


def test_rescheduling_a_key_replaces_its_deadline():
    timers = Timers()
    timers.schedule(hb(10, "a"))
    timers.schedule(hb(50, "a"))
    assert len(timers) == 1
    assert timers.next_deadline() == 50
    assert timers.get(heartbeat_key("g", "a")).deadline_ms == 50


def test_join_and_initial_join_share_a_key():
    timers = Timers()
    timers.schedule(Timer(10, TimerKind.INITIAL_JOIN, "g", delay_ms=10, remaining_ms=5))
    timers.schedule(Timer(20, TimerKind.JOIN, "g"))
    assert [t.kind for t in timers.all()] == [TimerKind.JOIN]
    timers.cancel(join_key("g"))
    assert timers.all() == []


def test_cancel_and_cancel_group():
    timers = Timers()
    timers.schedule(hb(10, "a"))
    timers.schedule(hb(20, "b"))
    timers.schedule(hb(5, "x", group="other"))
    timers.cancel(heartbeat_key("g", "a"))
    timers.cancel(heartbeat_key("g", "nobody"))
    assert [t.member_id for t in timers.all()] == ["x", "b"]
    timers.cancel_group("g")
    assert [t.member_id for t in timers.all()] == ["x"]


def test_many_reschedules_stay_compact_and_correct():
    timers = Timers()
    for i in range(10_000):
        timers.schedule(hb(i, "a"))
    assert len(timers._heap) < 200
    assert timers.pop_due(9_998) is None
    assert timers.pop_due(9_999).deadline_ms == 9_999
