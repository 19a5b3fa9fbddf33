"""Kafka's simple assignor for share groups: sharing, balance, stickiness."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.share.simple_assignor import assign

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def parts(topic: uuid.UUID, count: int) -> list[tuple[uuid.UUID, int]]:
    return [(topic, i) for i in range(count)]


def test_more_members_than_partitions_share_them() -> None:
    target = assign({m: frozenset({"a"}) for m in ("m1", "m2", "m3")}, {"a": parts(A, 1)}, {})
    assert target == {m: frozenset({(A, 0)}) for m in ("m1", "m2", "m3")}


def test_fewer_members_split_the_partitions() -> None:
    target = assign({"m1": frozenset({"a"}), "m2": frozenset({"a"})}, {"a": parts(A, 4)}, {})
    assert [len(target["m1"]), len(target["m2"])] == [2, 2]
    assert target["m1"] | target["m2"] == frozenset(parts(A, 4))  # each partition once


def test_three_partitions_four_members_each_partition_twice() -> None:
    subscriptions = {m: frozenset({"a"}) for m in ("m1", "m2", "m3", "m4")}
    target = assign(subscriptions, {"a": parts(A, 3)}, {})
    assert sorted(len(tps) for tps in target.values()) == [1, 1, 2, 2]
    for tp in parts(A, 3):
        assert sum(tp in tps for tps in target.values()) == 2


def test_a_joining_member_leaves_the_others_their_partitions() -> None:
    before = assign({"m1": frozenset({"a"}), "m2": frozenset({"a"})}, {"a": parts(A, 4)}, {})
    subscriptions = {m: frozenset({"a"}) for m in ("m0", "m1", "m2")}
    after = assign(subscriptions, {"a": parts(A, 4)}, before)
    # m1 and m2 keep what they had, as far as their shares allow; m0 takes what is freed.
    assert after["m1"] <= before["m1"] and after["m2"] <= before["m2"]
    assert sorted(len(tps) for tps in after.values()) == [1, 1, 2]


def test_members_subscribed_to_different_topics_are_assigned_topic_by_topic() -> None:
    subscriptions = {"m1": frozenset({"a"}), "m2": frozenset({"a", "b"})}
    target = assign(subscriptions, {"a": parts(A, 1), "b": parts(B, 2)}, {})
    assert target == {"m1": frozenset({(A, 0)}), "m2": frozenset({(A, 0), (B, 0), (B, 1)})}


@settings(max_examples=100, deadline=None)
@given(
    members=st.integers(1, 7),
    partitions=st.integers(1, 7),
    previous=st.dictionaries(st.integers(0, 8), st.sets(st.integers(0, 8)), max_size=8),
)
def test_every_partition_is_shared_evenly(members: int, partitions: int, previous: dict) -> None:
    names = [f"m{i}" for i in range(members)]
    current = {f"m{m}": frozenset((A, p) for p in tps) for m, tps in previous.items()}
    target = assign({m: frozenset({"a"}) for m in names}, {"a": parts(A, partitions)}, current)
    sharing = -(-members // partitions)
    for tp in parts(A, partitions):
        assert sum(tp in tps for tps in target.values()) == sharing
    sizes = [len(tps) for tps in target.values()]
    assert max(sizes) - min(sizes) <= 1


def test_a_free_slot_held_back_by_the_only_short_member_is_filled_by_a_swap() -> None:
    # Found by CI: m3 kept partition 3 and was the only member below its share when 3 still
    # had a free slot, so the fill gave m0 a third partition while m2 had one.
    current = {"m4": frozenset({(A, 0)}), "m3": frozenset({(A, 3)})}
    members = {f"m{i}": frozenset({"a"}) for i in range(5)}
    target = assign(members, {"a": parts(A, 4)}, current)
    assert sorted(len(tps) for tps in target.values()) == [1, 1, 2, 2, 2]
    for tp in parts(A, 4):
        assert sum(tp in tps for tps in target.values()) == 2
