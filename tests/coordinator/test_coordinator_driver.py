"""Driving the coordinator the way the trio layer will: requests, completions, and one
timer task that sleeps until `next_deadline()` and then calls `tick`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupRequest,
    Protocol,
    SyncGroupRequest,
    TimerKind,
)


def join_request(member_id: str, client_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        member_id=member_id,
        protocol_type="consumer",
        protocols=(Protocol("range", b"meta"),),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=60_000,
        api_version=9,
        client_id=client_id,
    )


def test_an_io_loop_sees_timers_as_data_and_answers_from_completions():
    coordinator = GroupCoordinator(GroupConfig(), new_uuid=iter(["u1", "u2"]).__next__)
    waiting = {}  # ticket -> the connection's slot, as the I/O layer would keep
    now = 0

    def deliver():
        for completion in coordinator.take_completions():
            waiting[completion.ticket] = completion.response

    ticket = coordinator.join_group(join_request("", "app"), now)
    deliver()
    member_id = waiting[ticket].member_id
    assert (waiting[ticket].error, member_id) == (ErrorCode.member_id_required, "app-u1")
    # The pending member's session deadline is visible as data.
    assert [(t.kind, t.member_id, t.deadline_ms) for t in coordinator.timers()] == [
        (TimerKind.HEARTBEAT, member_id, 10_000)
    ]

    now = 5
    ticket = coordinator.join_group(join_request(member_id, "app"), now)
    deliver()
    assert ticket not in waiting  # parked
    initial = [t for t in coordinator.timers() if t.kind is TimerKind.INITIAL_JOIN]
    assert [(t.deadline_ms, t.delay_ms, t.remaining_ms) for t in initial] == [
        (3_005, 3_000, 57_000)  # "the rebalance completes at 3005 unless someone joins"
    ]

    # The timer task: sleep until the next deadline, tick, deliver.
    now = coordinator.next_deadline()
    assert now == 3_005
    coordinator.tick(now)
    deliver()
    response = waiting[ticket]
    assert (response.error, response.generation_id, response.leader) == (
        ErrorCode.none,
        1,
        member_id,
    )
    assert coordinator.take_completions() == []  # drained

    sync = coordinator.sync_group(SyncGroupRequest("g", 1, member_id, assignments={}), now)
    deliver()
    assert waiting[sync].error is ErrorCode.none
    # Only the member's session is left; nobody heartbeats, so it expires on time.
    assert coordinator.next_deadline() == now + 10_000
    coordinator.tick(coordinator.next_deadline())
    assert coordinator.list_groups()[0].state == "Empty"
    assert coordinator.next_deadline() is None


def test_tick_before_a_deadline_does_nothing():
    coordinator = GroupCoordinator(GroupConfig())
    coordinator.join_group(join_request("", "app"), 0)
    coordinator.take_completions()
    coordinator.tick(9_999)
    assert coordinator.group("g").pending_join_members
    coordinator.tick(10_000)
    assert not coordinator.group("g").pending_join_members
