"""Random request and clock sequences: bookkeeping stays consistent, no parked request
is ever answered twice, and once clients go quiet every parked request gets its answer."""

from __future__ import annotations

from coordinator_harness import GROUP, Harness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import GroupConfig, GroupState, MemberIdentity, Protocol
from kafkalite.coordinator.offset_commit import OffsetCommitRequest, PartitionCommit

PROTOCOL_SETS = (
    (Protocol("range", b"r"),),
    (Protocol("range", b"r2"), Protocol("roundrobin")),
    (Protocol("roundrobin"), Protocol("range")),
    (Protocol("sticky"),),
)

actions = st.one_of(
    st.tuples(
        st.just("join_new"),
        st.integers(0, 3),  # client / instance index
        st.booleans(),  # static?
        st.sampled_from([3, 4, 9]),
        st.integers(0, len(PROTOCOL_SETS) - 1),
    ),
    st.tuples(st.just("rejoin"), st.integers(0, 20), st.integers(0, len(PROTOCOL_SETS) - 1)),
    st.tuples(st.just("sync"), st.integers(0, 20), st.integers(-1, 0)),
    st.tuples(st.just("heartbeat"), st.integers(0, 20)),
    st.tuples(st.just("leave"), st.integers(0, 20)),
    st.tuples(st.just("commit"), st.integers(0, 20)),
    st.tuples(st.just("advance"), st.sampled_from([0, 500, 3_000, 7_000, 12_000, 31_000])),
    # Coordinated moves, so that histories often get as far as Stable.
    st.tuples(st.just("rejoin_all"), st.integers(0, len(PROTOCOL_SETS) - 1)),
    st.tuples(st.just("sync_all")),
    st.tuples(st.just("heartbeat_all")),
)


def check_invariants(h: Harness) -> None:
    group = h.group()
    if group is None:
        return
    members = group.members
    assert (group.leader_id is None) == (not members)
    assert group.leader_id is None or group.leader_id in members
    assert group.static_members == {
        m.group_instance_id: m.member_id for m in members.values() if m.is_static
    }
    assert not (set(group.pending_join_members) & set(members))
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert not any(m.is_awaiting_join for m in members.values())
        assert group.protocol_name is not None
    if group.state in (GroupState.PREPARING_REBALANCE, GroupState.STABLE, GroupState.EMPTY):
        assert not any(m.is_awaiting_sync for m in members.values())
    if group.state is GroupState.EMPTY:
        assert not members
    for member in members.values():
        if group.state is not GroupState.PREPARING_REBALANCE:
            assert not member.is_new


def known_ids(h: Harness) -> list[str]:
    ids = {r.member_id for r in h.answers.values() if getattr(r, "member_id", "")}
    return sorted(ids) or ["nobody"]


def run(h: Harness, action: tuple) -> None:
    kind = action[0]
    group = h.group()
    generation = group.generation_id if group else 0
    if kind == "join_new":
        _, index, static, version, protocols = action
        h.join(
            "",
            client_id=f"c{index}",
            instance=f"i{index}" if static else None,
            version=version,
            protocols=PROTOCOL_SETS[protocols],
        )
        return
    if kind == "advance":
        h.advance(action[1])
        return
    if kind in ("rejoin_all", "sync_all", "heartbeat_all"):
        run_all(h, action)
        return
    ids = known_ids(h)
    member_id = ids[action[1] % len(ids)]
    member = group.members.get(member_id) if group else None
    instance = member.group_instance_id if member else None
    if kind == "rejoin":
        h.join(member_id, instance=instance, protocols=PROTOCOL_SETS[action[2]])
    elif kind == "sync":
        assignments = {m: m.encode() for m in group.members} if group else {}
        h.sync(member_id, generation + action[2], assignments, instance=instance)
    elif kind == "heartbeat":
        h.heartbeat(member_id, generation, instance=instance)
    elif kind == "leave":
        h.leave(MemberIdentity(member_id, instance))
    elif kind == "commit":
        request = OffsetCommitRequest(
            GROUP,
            (PartitionCommit("t", 0, 1),),
            api_version=9,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )
        h.coordinator.commit_offsets(request, h.now)
        h.drain()


def run_all(h: Harness, action: tuple) -> None:
    group = h.group()
    if group is None:
        return
    kind, generation = action[0], group.generation_id
    if kind == "rejoin_all":
        for member_id in list(group.pending_join_members):
            h.join(member_id, protocols=PROTOCOL_SETS[action[1]])
        for member in list(group.members.values()):
            h.join(member.member_id, instance=member.group_instance_id, protocols=member.protocols)
    elif kind == "sync_all":
        assignments = {m: m.encode() for m in group.members}
        leader = group.leader_id
        for member in sorted(group.members.values(), key=lambda m: m.member_id == leader):
            h.sync(member.member_id, generation, assignments, instance=member.group_instance_id)
    else:
        for member in list(group.members.values()):
            h.heartbeat(member.member_id, generation, instance=member.group_instance_id)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(actions, max_size=40),
    st.sampled_from([0, 3_000]),
    st.lists(st.booleans(), max_size=3),
)
def test_random_histories_keep_invariants_and_answer_every_request(history, delay, start):
    h = Harness(GroupConfig(initial_rebalance_delay_ms=delay))
    if start:  # begin from a Stable group of static (True) and dynamic (False) members
        tickets = [
            h.join("", client_id=f"s{i}", instance=f"i{i}" if static else None, version=3)
            for i, static in enumerate(start)
        ]
        while h.state() == "PreparingRebalance":  # the initial delay may be extended
            h.advance(max(delay, 1))
        run_all(h, ("sync_all",))
        assert h.state() == "Stable" and not h.unanswered(), tickets
    for action in history:
        run(h, action)
        check_invariants(h)
    # Everyone goes quiet: every session, join and sync deadline must run out.
    for _ in range(12):
        h.advance(100_000)
        check_invariants(h)
    assert h.unanswered() == []
    group = h.group()
    assert group is None or group.state is GroupState.EMPTY
    assert h.coordinator.next_deadline() is None
    assert all(isinstance(r.error, ErrorCode) for r in h.answers.values())
