"""Deadlines as data: the coordinator never sleeps, it records when something is due.

Each timer has a key; scheduling a key again replaces its deadline (Kafka's coordinator
timer does the same), cancelling removes it. The I/O layer asks `next_deadline()`, sleeps
until then (or until a request arrives) and calls the coordinator's `tick(now_ms)`, which
pops due timers in deadline order and applies them.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from dataclasses import dataclass


class TimerKind(enum.Enum):
    # A member's (or pending member's) session: expires unless a heartbeat pushes it back.
    HEARTBEAT = "heartbeat"
    # The join phase of a rebalance ends at the latest here (the rebalance timeout).
    JOIN = "join"
    # The initial, delayed rebalance of an Empty group (group.initial.rebalance.delay.ms).
    INITIAL_JOIN = "initial-join"
    # Members that got their join response must send SyncGroup before this.
    SYNC = "sync"
    # KIP-848 consumer groups: a member's session, and the time it has to revoke partitions.
    CONSUMER_SESSION = "consumer-session"
    CONSUMER_REVOCATION = "consumer-revocation"


CONSUMER_TIMERS = frozenset({TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REVOCATION})
TimerKey = tuple[str, str, str]  # (family, group id, member id or "")


@dataclass(frozen=True, slots=True)
class Timer:
    deadline_ms: int
    kind: TimerKind
    group_id: str
    member_id: str = ""
    # SYNC: the generation the deadline belongs to (a newer generation ignores it).
    generation_id: int = -1
    # INITIAL_JOIN: Kafka's InitialDelayedJoin delay and remaining budget.
    delay_ms: int = 0
    remaining_ms: int = 0

    @property
    def key(self) -> TimerKey:
        # JOIN and INITIAL_JOIN share a key: a group has one join deadline at a time.
        joins = (TimerKind.JOIN, TimerKind.INITIAL_JOIN)
        family = "join" if self.kind in joins else self.kind.value
        return (family, self.group_id, self.member_id)


def heartbeat_key(group_id: str, member_id: str) -> TimerKey:
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> TimerKey:
    return ("join", group_id, "")


def sync_key(group_id: str) -> TimerKey:
    return ("sync", group_id, "")


class Timers:
    """Keyed deadlines with a lazily-cleaned heap for cheap earliest-first access."""

    def __init__(self) -> None:
        self._live: dict[TimerKey, tuple[int, Timer]] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = itertools.count()

    def schedule(self, timer: Timer) -> None:
        seq = next(self._seq)
        self._live[timer.key] = (seq, timer)
        heapq.heappush(self._heap, (timer.deadline_ms, seq, timer.key))
        # Every heartbeat reschedules, leaving a stale heap entry; compact now and then.
        if len(self._heap) > 4 * len(self._live) + 64:
            self._heap = [(t.deadline_ms, s, k) for k, (s, t) in self._live.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: TimerKey) -> None:
        self._live.pop(key, None)

    def cancel_group(self, group_id: str) -> None:
        for key in [key for key in self._live if key[1] == group_id]:
            del self._live[key]

    def get(self, key: TimerKey) -> Timer | None:
        entry = self._live.get(key)
        return entry[1] if entry else None

    def _clean_top(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            live = self._live.get(key)
            if live is not None and live[0] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._clean_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Timer | None:
        """Remove and return the earliest timer due at `now_ms`, ties in scheduling order."""
        self._clean_top()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        return self._live.pop(key)[1]

    def all(self) -> list[Timer]:
        return [timer for _, timer in sorted(self._live.values(), key=_order)]

    def __len__(self) -> int:
        return len(self._live)


def _order(entry: tuple[int, Timer]) -> tuple[int, int]:
    seq, timer = entry
    return (timer.deadline_ms, seq)
