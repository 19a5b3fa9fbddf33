"""The classic group states and the table of legal transitions between them.

Like h11's state tables, the rules are data: `VALID_PREVIOUS_STATES` maps each state to the
states a group may enter it from, exactly as Kafka's `ClassicGroupState.validPreviousStates`.
Any other transition is a bug in the coordinator, so `check_transition` raises.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class GroupState(enum.Enum):
    # Values are the names Kafka reports in DescribeGroups and ListGroups.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState

VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    # All members left (or the last one was removed) during a rebalance.
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    # A join, leave, failure or metadata change starts a rebalance from any live state.
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    # The join phase completed with at least one member: waiting for the leader's SyncGroup.
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    # The leader's assignment arrived.
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    # Deletion, expiry or unloading; Dead -> Dead is allowed so removal is idempotent.
    _S.DEAD: frozenset(
        {_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}
    ),
}


class IllegalTransition(RuntimeError):
    """The coordinator tried a transition the table forbids (a coordinator bug)."""


def is_legal_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    if not is_legal_transition(current, target):
        allowed = sorted(state.value for state in VALID_PREVIOUS_STATES[target])
        raise IllegalTransition(
            f"group {group_id!r} must be in one of {allowed} to move to {target}, "
            f"but it is {current}"
        )


def can_rebalance(state: GroupState) -> bool:
    """Kafka's `canRebalance`: a rebalance may start from this state."""
    return is_legal_transition(state, GroupState.PREPARING_REBALANCE)
