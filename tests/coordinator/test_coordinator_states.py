"""The transition table matches Kafka's ClassicGroupState, and is enforced."""

from __future__ import annotations

import itertools

import pytest

from kafkalite.coordinator import VALID_PREVIOUS_STATES, ClassicGroup, GroupState
from kafkalite.coordinator.states import IllegalTransition, can_rebalance, is_legal_transition

E, PR, CR, ST, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# Written out from Kafka's ClassicGroupState static block, independently of the module.
KAFKA_TABLE = {
    E: {PR},
    PR: {ST, CR, E},
    CR: {PR},
    ST: {CR},
    D: {ST, PR, CR, E, D},
}
ALL_PAIRS = list(itertools.product(GroupState, GroupState))


def test_state_names_are_kafkas():
    assert [str(s) for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


def test_table_is_kafkas():
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == KAFKA_TABLE


@pytest.mark.parametrize(("current", "target"), ALL_PAIRS, ids=lambda s: str(s))
def test_every_transition_is_checked(current, target):
    group = ClassicGroup("g", current, state_timestamp_ms=0)
    if current in KAFKA_TABLE[target]:
        group.transition_to(target, now_ms=42)
        assert (group.previous_state, group.state, group.state_timestamp_ms) == (
            current,
            target,
            42,
        )
    else:
        with pytest.raises(IllegalTransition):
            group.transition_to(target, now_ms=42)
        assert group.state is current


def test_can_rebalance_only_from_live_states():
    assert {s for s in GroupState if can_rebalance(s)} == {E, CR, ST}
    assert not is_legal_transition(PR, PR)
