"""JoinGroup and SyncGroup: generations, leaders, KIP-394, protocol choice and errors."""

from __future__ import annotations

import pytest
from coordinator_harness import Harness, form_stable_group
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import GroupConfig, JoinGroupMember, Protocol

OK = ErrorCode.none


def test_three_members_one_generation_leader_and_assignments():
    h = Harness()
    (a, ta), (b, tb), (c, tc) = (h.new_member(x) for x in ("a", "b", "c"))
    assert a.startswith("a-") and b.startswith("b-") and c.startswith("c-")
    assert h.state() == "PreparingRebalance"
    assert h.answer(ta) is None  # parked until the join phase completes

    h.advance(0)  # the initial-rebalance delay (0 here) elapses
    ra, rb, rc = h.answer(ta), h.answer(tb), h.answer(tc)
    assert h.state() == "CompletingRebalance"
    assert {r.generation_id for r in (ra, rb, rc)} == {1}
    assert {r.leader for r in (ra, rb, rc)} == {a}  # the first to join leads
    assert (ra.protocol_type, ra.protocol_name) == ("consumer", "range")
    assert ra.members == tuple(JoinGroupMember(m, None, b"range-meta") for m in (a, b, c))
    assert rb.members == rc.members == ()

    # Followers wait for the leader's SyncGroup.
    sb, sc = h.sync(b, 1), h.sync(c, 1)
    assert h.answer(sb) is None and h.answer(sc) is None
    sa = h.sync(a, 1, {a: b"A", b: b"B", c: b"C"})
    assert h.state() == "Stable"
    got = {m: h.answer(t) for m, t in ((a, sa), (b, sb), (c, sc))}
    assert {m: r.assignment for m, r in got.items()} == {a: b"A", b: b"B", c: b"C"}
    assert all(r.error is OK and r.protocol_name == "range" for r in got.values())
    assert h.unanswered() == []


def test_member_ids_are_client_id_or_instance_id_then_uuid():
    h = Harness()
    first = h.answer(h.join("", client_id="my-client"))
    assert (first.error, first.member_id) == (ErrorCode.member_id_required, "my-client-uuid1")
    static = h.join("", client_id="my-client", instance="host-7")
    assert h.answer(static) is None  # static members skip KIP-394 and are parked at once
    h.advance(0)
    assert h.answer(static).member_id == "host-7-uuid2"
    assert h.group().static_members == {"host-7": "host-7-uuid2"}


def test_member_id_required_round_trip_v4_and_direct_join_before_v4():
    h = Harness()
    required = h.answer(h.join("", version=4))
    assert required.error is ErrorCode.member_id_required
    assert required.generation_id == -1 and required.leader == ""
    assert h.group().pending_join_members == {required.member_id: None}
    assert h.state() == "Empty"  # a pending member does not start a rebalance

    rejoin = h.join(required.member_id, version=4)
    assert h.group().pending_join_members == {}
    assert h.state() == "PreparingRebalance"
    h.advance(0)
    assert h.answer(rejoin).member_id == required.member_id

    old = Harness()
    direct = old.join("", version=3)  # v3 clients do not know MEMBER_ID_REQUIRED
    old.advance(0)
    response = old.answer(direct)
    assert response.error is OK and response.member_id == "client-uuid1"


def test_pending_member_that_never_returns_expires_after_its_session():
    h = Harness()
    pending = h.answer(h.join("", session_ms=6_000)).member_id
    assert [(t.kind.value, t.member_id, t.deadline_ms) for t in h.coordinator.timers()] == [
        ("heartbeat", pending, h.now + 6_000)
    ]
    h.advance(5_999)
    assert h.group().is_pending_member(pending)
    h.advance(1)
    assert not h.group().is_pending_member(pending)
    assert h.answer(h.join(pending)).error is ErrorCode.unknown_member_id


def test_join_phase_waits_for_pending_members():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",))
    pending = h.answer(h.join("", client_id="b")).member_id
    assert h.state() == "Stable"  # handing out an id changes nothing yet
    ta = h.join(a)  # a rebalance starts; a has rejoined but b's id is outstanding
    assert h.answer(ta) is None and h.state() == "PreparingRebalance"
    tb = h.join(pending, client_id="b")
    assert h.answer(ta).generation_id == h.answer(tb).generation_id == generation + 1


def test_initial_rebalance_does_not_wait_for_pending_members():
    h = Harness()
    a, ta = h.new_member("a")
    pending = h.answer(h.join("", client_id="b")).member_id
    h.advance(0)  # the initial delay bounds the wait, as Kafka's InitialDelayedJoin
    assert h.answer(ta).generation_id == 1
    tb = h.join(pending, client_id="b")  # b arrives late: a new rebalance
    assert h.state() == "PreparingRebalance" and h.answer(tb) is None


def test_unknown_member_ids_and_groups():
    h = Harness()
    missing_group = h.answer(h.join("ghost-1"))
    assert (missing_group.error, missing_group.member_id) == (
        ErrorCode.unknown_member_id,
        "ghost-1",
    )
    assert h.state() == "missing"  # a stale member id does not create the group
    form_stable_group(h)
    assert h.answer(h.join("ghost-1")).error is ErrorCode.unknown_member_id


@pytest.mark.parametrize("session_ms", [5_999, 1_800_001])
def test_session_timeout_out_of_range(session_ms):
    h = Harness()
    response = h.answer(h.join("", session_ms=session_ms))
    assert response.error is ErrorCode.invalid_session_timeout
    assert h.state() == "missing"


def test_empty_group_id_is_invalid():
    h = Harness()
    assert h.answer(h.join("", group="")).error is ErrorCode.invalid_group_id
    assert h.answer(h.sync("m", 1, group="")).error is ErrorCode.invalid_group_id
    assert h.heartbeat("m", 1, group="") is ErrorCode.invalid_group_id
    assert h.leave("m", group="").error is ErrorCode.invalid_group_id


def test_inconsistent_group_protocol():
    h = Harness()
    form_stable_group(h)
    other_type = h.answer(h.join("", protocol_type="connect"))
    assert other_type.error is ErrorCode.inconsistent_group_protocol
    assert other_type.member_id == ""
    no_common = h.answer(h.join("", protocols=[Protocol("roundrobin")]))
    assert no_common.error is ErrorCode.inconsistent_group_protocol

    empty = Harness()
    assert empty.answer(empty.join("", protocols=[])).error is ErrorCode.inconsistent_group_protocol
    assert empty.answer(empty.join("", protocol_type="")).error is (
        ErrorCode.inconsistent_group_protocol
    )


def test_group_max_size():
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, max_size=2))
    form_stable_group(h, ("a", "b"))
    rejected = h.answer(h.join("", client_id="c"))
    assert (rejected.error, rejected.member_id) == (ErrorCode.group_max_size_reached, "")
    assert h.group().size == 2 and h.state() == "Stable"


def test_group_max_size_counts_members_awaiting_join_during_rebalance():
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, max_size=2))
    (a, b), generation = form_stable_group(h, ("a", "b"))
    ta = h.join(a)  # the leader rejoins: rebalance, one member awaiting
    c, tc = h.new_member("c")  # a second awaiting member: still within the limit
    assert h.answer(tc) is None
    # b has not rejoined, and two members already wait: b is shed.
    shed = h.answer(h.join(b))
    assert (shed.error, shed.member_id) == (ErrorCode.group_max_size_reached, "")
    assert set(h.group().members) == {a, c}
    h.advance(30_000)
    assert h.answer(ta).generation_id == h.answer(tc).generation_id == generation + 1


def test_follower_rejoin_without_changes_keeps_the_generation():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    response = h.answer(h.join(b))
    assert (response.error, response.generation_id, response.leader) == (OK, generation, a)
    assert response.members == ()
    assert h.state() == "Stable"


def test_follower_rejoin_with_new_metadata_rebalances():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    tb = h.join(b, protocols=[Protocol("range", b"new-subscription")])
    assert h.state() == "PreparingRebalance" and h.answer(tb) is None
    ta, tc = h.join(a), h.join(c)
    assert h.state() == "CompletingRebalance"  # everyone rejoined: no need to wait
    assert {h.answer(t).generation_id for t in (ta, tb, tc)} == {generation + 1}
    leader_view = dict((m.member_id, m.metadata) for m in h.answer(ta).members)
    assert leader_view[b] == b"new-subscription"


def test_leader_rejoin_rebalances_even_without_changes():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    h.join(a)
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(b, generation) is ErrorCode.rebalance_in_progress


def test_rejoin_during_completing_rebalance_resends_the_join_response():
    h = Harness()
    a, ta = h.new_member("a")
    b, tb = h.new_member("b")
    h.advance(0)
    again_leader, again_follower = h.answer(h.join(a)), h.answer(h.join(b))
    assert again_leader == h.answer(ta)  # a lost response is simply resent
    assert again_follower == h.answer(tb)
    assert h.state() == "CompletingRebalance"


def test_rejoin_with_new_metadata_during_completing_rebalance_restarts():
    h = Harness()
    a, ta = h.new_member("a")
    b, tb = h.new_member("b")
    h.advance(0)
    parked = h.sync(b, 1)
    tb2 = h.join(b, protocols=[Protocol("range", b"changed")])
    assert h.answer(parked).error is ErrorCode.rebalance_in_progress
    assert h.state() == "PreparingRebalance" and h.answer(tb2) is None


def test_a_second_parked_join_supersedes_the_first():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    first = h.join(a)
    second = h.join(a)  # e.g. a client retry after a request timeout
    assert h.answer(first).error is ErrorCode.rebalance_in_progress
    assert h.answer(second) is None and h.group().num_awaiting_join == 1
    h.join(b), h.join(c)
    assert h.answer(second).generation_id == generation + 1


def test_empty_assignment_for_members_the_leader_left_out():
    h = Harness()
    a, ta = h.new_member("a")
    b, tb = h.new_member("b")
    h.advance(0)
    sb = h.sync(b, 1)
    h.sync(a, 1, {a: b"A", "stranger": b"?"})
    assert h.answer(sb).assignment == b""
    assert h.group().members[a].assignment == b"A"


def test_sync_checks_protocol_type_and_name_when_given():
    h = Harness()
    a, ta = h.new_member("a")
    h.advance(0)
    wrong_name = h.sync(a, 1, protocol_type="consumer", protocol_name="roundrobin")
    assert h.answer(wrong_name).error is ErrorCode.inconsistent_group_protocol
    wrong_type = h.sync(a, 1, protocol_type="connect")
    assert h.answer(wrong_type).error is ErrorCode.inconsistent_group_protocol
    right = h.sync(a, 1, {a: b"x"}, protocol_type="consumer", protocol_name="range")
    assert h.answer(right).error is OK


def test_sync_errors():
    h = Harness()
    assert h.answer(h.sync("m", 1)).error is ErrorCode.unknown_member_id  # no group
    (a, b, c), generation = form_stable_group(h)
    assert h.answer(h.sync("stranger", generation)).error is ErrorCode.unknown_member_id
    assert h.answer(h.sync(b, generation - 1)).error is ErrorCode.illegal_generation
    again = h.answer(h.sync(b, generation))
    assert (again.error, again.assignment) == (OK, b.encode())  # Stable resends it


def test_sync_during_preparing_rebalance():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    h.join(a)
    assert h.answer(h.sync(b, generation)).error is ErrorCode.rebalance_in_progress


def test_a_second_parked_sync_supersedes_the_first():
    h = Harness()
    a, _ = h.new_member("a")
    b, _ = h.new_member("b")
    h.advance(0)
    first, second = h.sync(b, 1), h.sync(b, 1)
    assert h.answer(first).error is ErrorCode.rebalance_in_progress
    h.sync(a, 1, {b: b"B"})
    assert h.answer(second).assignment == b"B"


# -- protocol selection --


def test_protocol_choice_is_a_vote_among_common_protocols():
    h = Harness()
    rr, rng, sticky = Protocol("roundrobin"), Protocol("range"), Protocol("sticky")
    _, ta = h.new_member("a", protocols=[sticky, rr, rng])
    _, tb = h.new_member("b", protocols=[rr, rng])
    _, tc = h.new_member("c", protocols=[rng, rr, sticky])
    h.advance(0)
    # sticky is not supported by b; a and b vote roundrobin, c votes range.
    assert {h.answer(t).protocol_name for t in (ta, tb, tc)} == {"roundrobin"}


def test_a_member_must_share_a_protocol_with_everyone():
    h = Harness()
    h.new_member("a", protocols=[Protocol("range"), Protocol("roundrobin")])
    h.new_member("b", protocols=[Protocol("roundrobin")])
    refused = h.answer(h.join("", client_id="c", protocols=[Protocol("range")]))
    assert refused.error is ErrorCode.inconsistent_group_protocol


def test_protocol_tie_follows_java_hashmap_order():
    from kafkalite.coordinator.protocol_selection import _hashmap_order

    h = Harness()
    _, ta = h.new_member("a", protocols=[Protocol("range"), Protocol("roundrobin")])
    _, tb = h.new_member("b", protocols=[Protocol("roundrobin"), Protocol("range")])
    h.advance(0)
    # One vote each: Kafka keeps the first maximum in HashMap iteration order.
    first_in_java = _hashmap_order(["range", "roundrobin"])[0]
    assert h.answer(ta).protocol_name == first_in_java
    # "range".hashCode() = 108280125 = 0x0674393D; spread: 0x393D ^ 0x0674 -> low bits 9.
    # "roundrobin".hashCode() = -128548644, which spreads to bucket 10: range comes first.
    assert first_in_java == "range"


def test_cooperative_rebalance_bumps_generations():
    """Cooperative-sticky is client-side: the broker only needs correct generations."""
    protocols = [Protocol("cooperative-sticky", b"owned:none"), Protocol("range")]
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"), protocols=protocols)
    assert h.group().protocol_name == "cooperative-sticky"
    # b revoked partitions and rejoins with new owned-partitions metadata.
    new_protocols = [Protocol("cooperative-sticky", b"owned:p1"), Protocol("range")]
    tb = h.join(b, protocols=new_protocols)
    ta = h.join(a, protocols=protocols)
    assert h.answer(ta).generation_id == h.answer(tb).generation_id == generation + 1
    assert h.answer(h.sync(b, generation)).error is ErrorCode.illegal_generation
    assert h.heartbeat(b, generation) is ErrorCode.illegal_generation
    sb = h.sync(b, generation + 1)
    h.sync(a, generation + 1, {a: b"p0", b: b"p1"})
    assert h.answer(sb).assignment == b"p1"


def test_default_config_is_kafkas():
    config = GroupConfig()
    assert (config.min_session_timeout_ms, config.max_session_timeout_ms) == (6_000, 1_800_000)
    assert config.initial_rebalance_delay_ms == 3_000
    assert config.max_size == 2**31 - 1
