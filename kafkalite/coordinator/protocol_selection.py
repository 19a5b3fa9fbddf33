"""Choosing the group protocol by Kafka's vote.

Candidates are the protocols every member supports; each member votes for its most
preferred candidate and the protocol with most votes wins. Kafka counts votes in a
`java.util.HashMap` and takes `stream().max(...)`, which keeps the first maximum met in
the map's iteration order; `_hashmap_order` reproduces that order so ties resolve the same
way as on a Java broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafkalite.coordinator.member import Member
from kafkalite.coordinator.partitioning import java_string_hashcode

_HASHMAP_INITIAL_CAPACITY = 16
_HASHMAP_LOAD_FACTOR = 0.75


def candidate_protocols(members: Sequence[Member]) -> set[str]:
    """Protocol names supported by every member."""
    if not members:
        return set()
    names = set(members[0].protocol_names)
    for member in members[1:]:
        names &= member.protocol_names
    return names


def _hashmap_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a Java HashMap<String, _> built by inserting `keys` in order.

    A HashMap iterates bucket by bucket; a key's bucket is its spread hash masked by the
    table size, and keys sharing a bucket keep insertion order (resizes preserve it).
    """
    ordered = list(dict.fromkeys(keys))
    capacity = _HASHMAP_INITIAL_CAPACITY
    while len(ordered) > capacity * _HASHMAP_LOAD_FACTOR:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hashcode(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(ordered, key=bucket)  # sorted() is stable: insertion order within a bucket


def select_protocol(members: Sequence[Member]) -> str:
    if not members:
        raise ValueError("cannot select a protocol for a group without members")
    candidates = candidate_protocols(members)
    votes: dict[str, int] = {}
    for member in members:
        choice = member.vote(candidates)
        votes[choice] = votes.get(choice, 0) + 1
    best: str | None = None
    for name in _hashmap_order(votes):
        if best is None or votes[name] > votes[best]:
            best = name
    assert best is not None
    return best
