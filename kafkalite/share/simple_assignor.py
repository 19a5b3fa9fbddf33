"""Kafka's SimpleAssignor for share groups (Kafka 4.4's SimpleHomogeneousAssignmentBuilder and
SimpleHeterogeneousAssignmentBuilder), sans-IO.

Each partition is shared by `ceil(members / partitions)` members (so with more members than
partitions, several members read one partition), and the `sharing * partitions` slots are
spread evenly over the members. It is sticky: a member keeps the partitions it has, except
those no longer subscribed, those beyond its share, and those shared by too many members;
the slots left are filled partition by partition with the members furthest below their
share. A group whose members subscribe to different topics is assigned topic by topic,
among each topic's subscribers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkalite.coordinator.consumer_group import Partitions, TopicIdPartition

NAME = "simple"


def assign(
    subscriptions: Mapping[str, frozenset[str]],
    partitions_of: Mapping[str, Sequence[TopicIdPartition]],
    current: Mapping[str, Partitions],
) -> dict[str, Partitions]:
    """The target assignment: member id -> partitions. `subscriptions` maps each member to
    its topics, `partitions_of` each topic to its partitions, `current` each member to what
    it has now."""
    members = sorted(subscriptions)
    if len(set(subscriptions.values())) <= 1:  # homogeneous: all partitions at once
        topics = next(iter(subscriptions.values()), frozenset())
        every = [tp for topic in sorted(topics) for tp in partitions_of.get(topic, ())]
        return _assign(members, every, current)
    target: dict[str, set[TopicIdPartition]] = {member: set() for member in members}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        subscribers = [m for m in members if topic in subscriptions[m]]
        for member, tps in _assign(
            subscribers, list(partitions_of.get(topic, ())), current
        ).items():
            target[member] |= tps
    return {member: frozenset(tps) for member, tps in target.items()}


def _assign(
    members: list[str], partitions: list[TopicIdPartition], current: Mapping[str, Partitions]
) -> dict[str, Partitions]:
    if not members or not partitions:
        return {member: frozenset() for member in members}
    count, size = len(members), len(partitions)
    sharing = (count + size - 1) // size
    slots = sharing * size
    # ceil(slots * (i + 1) / count) - ceil(slots * i / count): an even spread of the slots.
    desired = {
        member: -(-slots * (i + 1) // count) - -(-slots * i // count)
        for i, member in enumerate(members)
    }
    wanted = set(partitions)
    held: dict[str, list[TopicIdPartition]] = {}
    for member in members:
        kept = [tp for tp in sorted(current.get(member, ())) if tp in wanted]
        held[member] = kept[: desired[member]]  # revoke what is beyond its share
    holders: dict[TopicIdPartition, list[str]] = {tp: [] for tp in partitions}
    for member in members:
        for tp in held[member]:
            holders[tp].append(member)
    for tp, owners in holders.items():  # revoke partitions shared by too many members
        for member in owners[sharing:]:
            held[member].remove(tp)
        del owners[sharing:]
    for tp in partitions:  # fill the free slots, furthest below their share first
        while len(holders[tp]) < sharing:
            candidates = [m for m in members if m not in holders[tp]]
            member = max(candidates, key=lambda m: (desired[m] - len(held[m]), -members.index(m)))
            if len(held[member]) >= desired[member]:
                member = _swap_for(tp, member, members, desired, held, holders)
            held[member].append(tp)
            holders[tp].append(member)
    return {member: frozenset(tps) for member, tps in held.items()}


def _swap_for(
    tp: TopicIdPartition,
    full: str,
    members: list[str],
    desired: dict[str, int],
    held: dict[str, list[TopicIdPartition]],
    holders: dict[TopicIdPartition, list[str]],
) -> str:
    """`tp` has a free slot but every member without it has its share: the members below
    their share all hold `tp` already. One of those (`short`) takes a partition `other` from
    `full`, which then has room for `tp`; counts stay even and no partition is held twice.

    Such a pair always exists: were all of `full`'s partitions also `short`'s, `short` (which
    holds `tp` too) would hold more than `full`, at least desired[full] + 1 >= desired[short]
    (shares differ by at most one), and would not be short."""
    short, other = next(
        (short, other)
        for short in members
        if len(held[short]) < desired[short]
        for other in held[full]
        if short not in holders[other]
    )
    held[full].remove(other)
    holders[other].remove(full)
    held[short].append(other)
    holders[other].append(short)
    return full
