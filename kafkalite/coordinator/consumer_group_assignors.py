"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

Both are pure functions from the members' subscriptions, the subscribed topics and the
previous target assignment to the next target assignment.

* uniform (Kafka's default): every partition of a subscribed topic goes to one subscriber,
  partition counts differ by at most one between members that could take each other's
  partitions, and as few partitions as possible move away from their previous member.
* range: per topic, the subscribers sorted by member id get contiguous ranges of partitions,
  the first ones one partition more when the count does not divide evenly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkalite.coordinator.consumer_group import Partitions, TopicIdPartition, TopicInfo

Subscriptions = Mapping[str, tuple[str, ...]]  # member id -> subscribed topic names
Assignor = Callable[[Subscriptions, Mapping[str, TopicInfo], Mapping[str, Partitions]], dict]


def _partitions_of(topic: TopicInfo) -> list[TopicIdPartition]:
    return [(topic.topic_id, p) for p in range(topic.partitions)]


def uniform(
    subscriptions: Subscriptions,
    topics: Mapping[str, TopicInfo],
    previous: Mapping[str, Partitions],
) -> dict[str, Partitions]:
    eligible: dict[TopicIdPartition, list[str]] = {}
    for name, info in sorted(topics.items()):
        members = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        for tp in _partitions_of(info):
            if members:
                eligible[tp] = members
    owner: dict[TopicIdPartition, str] = {}
    load = {member: 0 for member in subscriptions}
    for member in sorted(previous):  # stickiness: keep what is still assignable
        for tp in sorted(previous[member]):
            if member in load and member in eligible.get(tp, ()) and tp not in owner:
                owner[tp] = member
                load[member] += 1
    for tp, members in eligible.items():
        if tp not in owner:
            chosen = min(members, key=lambda m: (load[m], m))
            owner[tp] = chosen
            load[chosen] += 1
    _balance(owner, eligible, load)
    result: dict[str, set[TopicIdPartition]] = {member: set() for member in subscriptions}
    for tp, member in owner.items():
        result[member].add(tp)
    return {member: frozenset(tps) for member, tps in result.items()}


def _balance(
    owner: dict[TopicIdPartition, str],
    eligible: Mapping[TopicIdPartition, list[str]],
    load: dict[str, int],
) -> None:
    """Move partitions from a member to one holding at least two fewer, while any can move.

    Each move lowers the sum of squared loads, so this ends.
    """
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner, key=lambda tp: (-load[owner[tp]], tp)):
            current = owner[tp]
            receiver = min(eligible[tp], key=lambda m: (load[m], m))
            if load[receiver] <= load[current] - 2:
                owner[tp] = receiver
                load[current] -= 1
                load[receiver] += 1
                moved = True
                break


def range_(
    subscriptions: Subscriptions,
    topics: Mapping[str, TopicInfo],
    previous: Mapping[str, Partitions],
) -> dict[str, Partitions]:
    result: dict[str, set[TopicIdPartition]] = {member: set() for member in subscriptions}
    for name, info in sorted(topics.items()):
        members = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        if not members:
            continue
        share, extra = divmod(info.partitions, len(members))
        start = 0
        for index, member in enumerate(members):
            count = share + (1 if index < extra else 0)
            result[member].update((info.topic_id, p) for p in range(start, start + count))
            start += count
    return {member: frozenset(tps) for member, tps in result.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
