"""What starts and ends rebalances: leaving, session expiry, timeouts, the initial delay."""

from __future__ import annotations

from coordinator_harness import REBALANCE_MS, SESSION_MS, Harness, form_stable_group
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import GroupConfig, MemberIdentity, TimerKind

OK = ErrorCode.none


def session_deadline(h: Harness, member_id: str) -> int | None:
    for timer in h.coordinator.timers():
        if timer.kind is TimerKind.HEARTBEAT and timer.member_id == member_id:
            return timer.deadline_ms
    return None


# -- LeaveGroup --


def test_member_leaves_then_the_rest_rebalance():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    response = h.leave(c)
    assert response.error is OK
    assert [(m.member_id, m.error) for m in response.members] == [(c, OK)]
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, generation) is ErrorCode.rebalance_in_progress
    ta, tb = h.join(a), h.join(b)
    assert h.state() == "CompletingRebalance"  # both remaining members are back
    ra = h.answer(ta)
    assert ra.generation_id == h.answer(tb).generation_id == generation + 1
    assert [m.member_id for m in ra.members] == [a, b]


def test_leader_leaves_and_the_next_member_leads():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    h.leave(a)
    assert h.group().leader_id == b
    tb, tc = h.join(b), h.join(c)
    assert h.answer(tb).leader == h.answer(tc).leader == b
    assert len(h.answer(tb).members) == 2


def test_last_member_leaving_empties_the_group():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",))
    h.leave(a)
    group = h.group()
    assert (h.state(), group.generation_id, group.protocol_name) == ("Empty", generation + 1, None)
    assert group.protocol_type == "consumer"  # Kafka keeps the type of an emptied group
    assert h.coordinator.timers() == []


def test_leave_errors_and_batches():
    h = Harness()
    # A missing group: every member is unknown, with no top-level error (as Kafka 4).
    unknown_group = h.leave(MemberIdentity("m"), MemberIdentity("", "i"), group="nope")
    assert unknown_group.error is OK
    assert [(m.member_id, m.group_instance_id, m.error) for m in unknown_group.members] == [
        ("m", None, ErrorCode.unknown_member_id),
        ("", "i", ErrorCode.unknown_member_id),
    ]
    (a, b, c), generation = form_stable_group(h)
    response = h.leave(MemberIdentity(b), MemberIdentity("stranger"), MemberIdentity(c))
    assert [(m.member_id, m.error) for m in response.members] == [
        (b, OK),
        ("stranger", ErrorCode.unknown_member_id),
        (c, OK),
    ]
    assert response.error is OK and set(h.group().members) == {a}
    assert h.state() == "PreparingRebalance"


def test_failed_leave_does_not_rebalance():
    h = Harness()
    form_stable_group(h)
    response = h.leave("stranger")
    assert response.members[0].error is ErrorCode.unknown_member_id
    assert h.state() == "Stable"


def test_pending_member_can_leave():
    h = Harness()
    form_stable_group(h)
    pending = h.answer(h.join("")).member_id
    assert h.leave(pending).members[0].error is OK
    assert not h.group().is_pending_member(pending)
    assert session_deadline(h, pending) is None
    # As in Kafka 4, any successful leave from a Stable group starts a rebalance.
    assert h.state() == "PreparingRebalance"


def test_leave_answers_a_parked_join_with_unknown_member_id():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"))
    ta = h.join(a)
    h.leave(a)
    assert h.answer(ta).error is ErrorCode.unknown_member_id
    tb = h.join(b)
    assert h.answer(tb).generation_id == generation + 1


def test_leave_ends_the_join_phase_when_the_leaver_was_awaited():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    ta, tb = h.join(a), h.join(b)
    h.leave(c)
    assert h.answer(ta).generation_id == h.answer(tb).generation_id == generation + 1


# -- sessions --


def test_session_expiry_removes_the_member_and_rebalances():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    start = h.now
    assert session_deadline(h, c) == start + SESSION_MS  # timers are data
    for _ in range(3):
        h.advance(3_000)
        assert h.heartbeat(a, generation) is OK
        assert h.heartbeat(b, generation) is OK
    h.advance_to(start + SESSION_MS - 1)
    assert c in h.group().members and h.state() == "Stable"
    h.advance(1)  # c never heartbeated: its session runs out
    assert c not in h.group().members
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(c, generation) is ErrorCode.unknown_member_id
    assert h.heartbeat(a, generation) is ErrorCode.rebalance_in_progress
    ta, tb = h.join(a), h.join(b)
    assert h.answer(ta).generation_id == h.answer(tb).generation_id == generation + 1


def test_heartbeats_push_the_session_deadline():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",))
    h.advance(9_000)
    h.heartbeat(a, generation)
    assert session_deadline(h, a) == h.now + SESSION_MS
    h.advance(9_999)
    assert h.state() == "Stable"
    h.advance(1)
    assert h.state() == "Empty"


def test_a_member_parked_in_join_is_not_expired():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"), rebalance_ms=60_000)
    ta = h.join(a, rebalance_ms=60_000)
    for _ in range(10):  # b stays alive but does not rejoin: the join phase drags on
        h.advance(3_000)
        assert h.heartbeat(b, generation) is ErrorCode.rebalance_in_progress
    # a has sat in JoinGroup for three of its sessions: the parked request keeps it alive.
    assert a in h.group().members and h.answer(ta) is None
    h.advance(30_000)  # the 60 s rebalance timeout: b is dropped, a goes on alone
    assert h.answer(ta).generation_id == generation + 1
    assert set(h.group().members) == {a}


def test_a_member_that_does_not_rejoin_in_time_is_dropped():
    h = Harness()
    (a, b, c), generation = form_stable_group(h, session_ms=60_000)
    h.advance(1_000)
    ta, tb = h.join(a, session_ms=60_000), h.join(b, session_ms=60_000)
    # c keeps heartbeating (it is alive) but never rejoins.
    h.advance(REBALANCE_MS - 1)
    assert h.heartbeat(c, generation) is ErrorCode.rebalance_in_progress
    assert h.answer(ta) is None
    h.advance(1)  # the rebalance timeout
    assert c not in h.group().members
    ra = h.answer(ta)
    assert ra.generation_id == h.answer(tb).generation_id == generation + 1
    assert len(ra.members) == 2
    assert h.answer(h.sync(c, generation + 1)).error is ErrorCode.unknown_member_id


def test_the_leader_not_rejoining_hands_leadership_to_a_member_that_did():
    h = Harness()
    (a, b, c), generation = form_stable_group(h, session_ms=60_000)
    h.leave(c)  # a rebalance; the leader a stays alive but never rejoins
    tb = h.join(b, session_ms=60_000)
    h.advance(REBALANCE_MS - 1)
    assert h.heartbeat(a, generation) is ErrorCode.rebalance_in_progress
    h.advance(1)
    response = h.answer(tb)
    assert (response.leader, response.generation_id) == (b, generation + 1)
    assert [m.member_id for m in response.members] == [b]
    assert set(h.group().members) == {b}


def test_new_member_join_timeout():
    config = GroupConfig(initial_rebalance_delay_ms=0, new_member_join_timeout_ms=1_000)
    h = Harness(config)
    (a,), generation = form_stable_group(h, ("a",), session_ms=60_000)
    d, td = h.new_member("d")  # a rebalance starts; a is slow to rejoin
    assert session_deadline(h, d) == h.now + 1_000  # not the 10 s session timeout
    h.advance(1_000)
    assert h.answer(td).error is ErrorCode.unknown_member_id  # told to start over
    assert d not in h.group().members


def test_members_that_never_sync_are_removed():
    h = Harness()
    a, ta = h.new_member("a", session_ms=60_000)
    b, tb = h.new_member("b", session_ms=60_000)
    c, tc = h.new_member("c", session_ms=60_000)
    h.advance(0)
    sa = h.sync(a, 1, {a: b"A", b: b"B", c: b"C"})
    sb = h.sync(b, 1)
    assert h.state() == "Stable" and h.answer(sb).assignment == b"B"
    sync_timer = [t for t in h.coordinator.timers() if t.kind is TimerKind.SYNC]
    assert [(t.deadline_ms, t.generation_id) for t in sync_timer] == [(h.now + REBALANCE_MS, 1)]
    h.advance(REBALANCE_MS)  # c never sent SyncGroup
    assert c not in h.group().members
    assert h.state() == "PreparingRebalance"
    assert h.answer(sa).error is OK


def test_leader_never_syncs_then_parked_followers_must_rejoin():
    h = Harness()
    a, _ = h.new_member("a")
    b, _ = h.new_member("b")
    h.advance(0)
    sb = h.sync(b, 1)
    h.advance(REBALANCE_MS)
    assert h.answer(sb).error is ErrorCode.rebalance_in_progress
    assert set(h.group().members) == {b} and h.group().leader_id == b


def test_sync_deadline_is_cancelled_once_everyone_synced():
    h = Harness()
    form_stable_group(h)
    assert not [t for t in h.coordinator.timers() if t.kind is TimerKind.SYNC]


def test_all_members_gone_during_rebalance_empties_the_group():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"))
    h.leave(a)
    h.advance(SESSION_MS)  # b never heartbeats nor rejoins
    assert h.state() == "Empty" and h.group().generation_id == generation + 1


# -- heartbeats --


def test_heartbeat_answers_by_state():
    h = Harness()
    assert h.heartbeat("m", 0) is ErrorCode.unknown_member_id  # no group
    a, ta = h.new_member("a")
    assert h.heartbeat(a, 0) is ErrorCode.rebalance_in_progress  # PreparingRebalance
    h.advance(0)
    assert h.heartbeat(a, 1) is OK  # CompletingRebalance: between join and sync
    assert h.heartbeat(a, 0) is ErrorCode.illegal_generation
    assert h.heartbeat("stranger", 1) is ErrorCode.unknown_member_id
    h.sync(a, 1, {a: b""})
    assert h.heartbeat(a, 1) is OK
    h.leave(a)
    assert h.state() == "Empty"
    assert h.heartbeat(a, 2) is ErrorCode.unknown_member_id


# -- the initial rebalance delay --


def test_initial_rebalance_waits_for_the_delay():
    h = Harness(GroupConfig())  # Kafka's default 3 s delay
    a, ta = h.new_member("a")
    h.advance(2_999)
    assert h.answer(ta) is None and h.state() == "PreparingRebalance"
    h.advance(1)
    assert h.answer(ta).generation_id == 1


def test_initial_rebalance_delay_extends_while_members_arrive():
    h = Harness(GroupConfig())
    start = h.now
    a, ta = h.new_member("a")
    h.advance(1_000)
    b, tb = h.new_member("b")
    h.advance(2_000)  # first delay over, but b arrived: wait another 3 s
    assert h.answer(ta) is None
    h.advance(1_000)
    c, tc = h.new_member("c")  # and c arrived during the second delay
    h.advance(2_000)
    assert h.answer(ta) is None
    assert h.now == start + 6_000
    h.advance(2_999)
    assert h.answer(ta) is None
    h.advance(1)  # 9 s: a full delay with no newcomer
    assert {h.answer(t).generation_id for t in (ta, tb, tc)} == {1}
    assert h.answer(ta).leader == a and len(h.answer(ta).members) == 3


def test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout():
    h = Harness(GroupConfig())
    a, ta = h.new_member("a", rebalance_ms=5_000)
    h.advance(1_000)
    h.new_member("b", rebalance_ms=5_000)
    h.advance(2_000)  # 3 s: extend, but only by the 2 s left of the 5 s rebalance timeout
    h.advance(1_000)
    h.new_member("c", rebalance_ms=5_000)  # a newcomer cannot extend it further
    h.advance(999)
    assert h.answer(ta) is None
    h.advance(1)  # 5 s
    assert h.answer(ta).generation_id == 1 and len(h.answer(ta).members) == 3


def test_later_rebalances_complete_as_soon_as_everyone_rejoined():
    h = Harness(GroupConfig())
    a, ta = h.new_member("a")
    h.advance(3_000)
    h.sync(a, 1, {a: b""})
    tb = h.join("", client_id="b", version=3)  # not initial anymore: no delay
    ta2 = h.join(a)
    assert h.answer(ta2).generation_id == h.answer(tb).generation_id == 2
