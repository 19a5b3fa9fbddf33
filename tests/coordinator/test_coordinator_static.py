"""Static membership (KIP-345): restarts without rebalances, and fencing of duplicates."""

from __future__ import annotations

from coordinator_harness import REBALANCE_MS, Harness
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import MemberIdentity, PartitionCommit, Protocol
from kafkalite.coordinator.offset_commit import OffsetCommitRequest

OK = ErrorCode.none
FENCED = ErrorCode.fenced_instance_id


def static_group(h: Harness, instances=("i1", "i2"), **kwargs) -> tuple[list[str], int]:
    """A Stable group of static members; the leader assigns b"<instance>" to each."""
    tickets = [h.join("", client_id=f"c-{i}", instance=i, **kwargs) for i in instances]
    h.advance(0)
    ids = [h.answer(t).member_id for t in tickets]
    generation = h.answer(tickets[0]).generation_id
    h.sync(
        ids[0],
        generation,
        {m: i.encode() for m, i in zip(ids, instances, strict=True)},
        instance=instances[0],
    )
    for member_id, instance in zip(ids[1:], instances[1:], strict=True):
        h.sync(member_id, generation, instance=instance)
    assert h.state() == "Stable"
    return ids, generation


def test_static_restart_gets_its_old_assignment_without_a_rebalance():
    h = Harness()
    (m1, m2), generation = static_group(h)
    restarted = h.answer(h.join("", client_id="c-i2", instance="i2"))
    assert restarted.error is OK
    new_id = restarted.member_id
    assert new_id != m2 and new_id.startswith("i2-")
    assert restarted.generation_id == generation  # no new generation
    assert h.state() == "Stable"
    assert h.group().static_members == {"i1": m1, "i2": new_id}
    sync = h.answer(h.sync(new_id, generation, instance="i2"))
    assert (sync.error, sync.assignment) == (OK, b"i2")
    assert h.heartbeat(m1, generation, instance="i1") is OK  # the other member noticed nothing


def test_the_old_member_id_is_fenced():
    h = Harness()
    (m1, m2), generation = static_group(h)
    new_id = h.answer(h.join("", instance="i2")).member_id
    assert h.heartbeat(m2, generation, instance="i2") is FENCED
    assert h.answer(h.sync(m2, generation, instance="i2")).error is FENCED
    assert h.answer(h.join(m2, instance="i2")).error is FENCED
    assert h.leave(MemberIdentity(m2, "i2")).members[0].error is FENCED
    commit = h.coordinator.commit_offsets(
        OffsetCommitRequest(
            h.group().group_id,
            (PartitionCommit("t", 0, 5),),
            api_version=9,
            generation_id=generation,
            member_id=m2,
            group_instance_id="i2",
        ),
        h.now,
    )
    assert commit.partitions[0].error is FENCED
    assert h.heartbeat(new_id, generation, instance="i2") is OK


def test_a_duplicate_instance_fences_the_parked_requests_of_the_old_one():
    h = Harness()
    (m1, m2, m3), generation = static_group(h, ("i1", "i2", "i3"))
    h.join(m1, instance="i1")  # the leader rejoins: a rebalance (i3 keeps it open)
    parked = h.join(m2, instance="i2")
    assert h.answer(parked) is None
    duplicate = h.join("", instance="i2")  # a second process with the same instance id
    fenced = h.answer(parked)
    assert (fenced.error, fenced.member_id) == (FENCED, m2)
    assert h.answer(duplicate) is None  # parked in the ongoing rebalance, under a new id
    h.join(m3, instance="i3")
    response = h.answer(duplicate)
    assert response.error is OK and response.generation_id == generation + 1
    assert response.member_id == h.group().static_members["i2"] != m2


def test_unknown_instance_with_a_member_id_is_unknown():
    h = Harness()
    (m1, m2), generation = static_group(h)
    assert h.answer(h.join(m1, instance="other")).error is ErrorCode.unknown_member_id
    assert h.heartbeat(m1, generation, instance="other") is ErrorCode.unknown_member_id


def test_static_leader_restart_v9_skips_the_assignor():
    h = Harness()
    (m1, m2), generation = static_group(h)
    response = h.answer(h.join("", instance="i1", version=9))
    assert response.leader == response.member_id  # it is told it leads...
    assert response.skip_assignment  # ...but must not compute a new assignment
    assert {m.member_id for m in response.members} == {response.member_id, m2}
    assert h.state() == "Stable"


def test_static_leader_restart_before_v9_hears_the_old_leader_id():
    h = Harness()
    (m1, m2), generation = static_group(h)
    response = h.answer(h.join("", instance="i1", version=8))
    assert response.leader == m1 != response.member_id
    assert not response.skip_assignment and response.members == ()
    assert h.group().leader_id == response.member_id  # it does lead, internally


def test_static_restart_that_changes_the_protocol_choice_rebalances():
    h = Harness()
    both = [Protocol("range"), Protocol("roundrobin")]
    (m1, m2), generation = static_group(h, protocols=both)
    assert h.group().protocol_name == "range"
    # i2 comes back preferring roundrobin: one vote each, and Java's HashMap order
    # still picks range, so no rebalance...
    h.join("", instance="i2", protocols=[Protocol("roundrobin"), Protocol("range")])
    assert h.state() == "Stable"
    # ...but dropping range altogether forces roundrobin, hence a rebalance.
    restarted = h.join("", instance="i2", protocols=[Protocol("roundrobin")])
    assert h.state() == "PreparingRebalance" and h.answer(restarted) is None


def test_static_restart_during_completing_rebalance_rebalances():
    h = Harness()
    t1 = h.join("", instance="i1")
    t2 = h.join("", instance="i2")
    h.advance(0)
    parked = h.sync(h.answer(t2).member_id, 1, instance="i2")
    h.join("", instance="i2")
    assert h.answer(parked).error is FENCED  # the old id's parked SyncGroup
    assert h.state() == "PreparingRebalance"
    assert h.answer(t1).error is OK


def test_static_members_are_not_dropped_for_missing_a_rejoin():
    h = Harness()
    (m1, m2), generation = static_group(h, session_ms=60_000)
    t1 = h.join(m1, instance="i1", session_ms=60_000)
    h.advance(REBALANCE_MS)  # i2 never rejoins, but it is static: it keeps its slot
    response = h.answer(t1)
    assert response.generation_id == generation + 1
    assert {m.member_id for m in response.members} == {m1, m2}


def test_a_static_leader_that_does_not_rejoin_loses_the_lead_but_not_its_slot():
    h = Harness()
    (m1, m2), generation = static_group(h, session_ms=60_000)
    h.leave(MemberIdentity("", "i3"))  # unknown instance: nothing happens
    t2 = h.join(m2, instance="i2", protocols=[Protocol("range", b"changed")], session_ms=60_000)
    h.advance(REBALANCE_MS)
    response = h.answer(t2)
    assert response.leader == m2
    assert m1 in h.group().members


def test_no_static_member_rejoins_then_the_join_phase_is_extended():
    h = Harness()
    (m1, m2), generation = static_group(h, session_ms=60_000)
    h.leave(MemberIdentity("", "i1"))  # admin removal of i1 by instance id
    assert set(h.group().members) == {m2}
    h.advance(REBALANCE_MS)  # i2 is static and did not rejoin: wait another timeout
    assert h.state() == "PreparingRebalance" and h.group().generation_id == generation
    h.advance(REBALANCE_MS)  # its session (60 s) runs out: the group empties
    assert h.state() == "Empty"


def test_static_members_expire_like_any_other():
    h = Harness()
    (m1, m2), generation = static_group(h)
    h.advance(10_000)
    assert h.state() == "Empty"
    assert h.group().static_members == {}


def test_leave_by_instance_id_only():
    h = Harness()
    (m1, m2), generation = static_group(h)
    response = h.leave(MemberIdentity("", "i2"), MemberIdentity("", "nope"))
    assert [(m.member_id, m.group_instance_id, m.error) for m in response.members] == [
        ("", "i2", OK),
        ("", "nope", ErrorCode.unknown_member_id),
    ]
    assert set(h.group().members) == {m1}
