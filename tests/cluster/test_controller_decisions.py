"""The controller's sans-IO parts: replica placement (Kafka's AdminUtils cases) and the
partition-state decisions (initial states, leader election, ISR after a broker failure)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kafkalite.broker.replica_assignment import (
    InvalidReplicaAssignment,
    assign_replicas,
    rack_alternated,
)
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller_decisions import PartitionView, StateWrite, decide

NO_RACKS = {b: None for b in range(5)}


def test_round_robin_matches_kafka() -> None:
    # ReplicaAssignmentTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start 0.
    assert assign_replicas(NO_RACKS, 10, 3, start_index=0, replica_shift=0) == [
        [0, 1, 2],
        [1, 2, 3],
        [2, 3, 4],
        [3, 4, 0],
        [4, 0, 1],
        [0, 2, 3],
        [1, 3, 4],
        [2, 4, 0],
        [3, 0, 1],
        [4, 1, 2],
    ]


def test_rack_aware_matches_kafka() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(racks, 7, 3, start_index=0, replica_shift=0) == [
        [0, 3, 1],
        [3, 1, 5],
        [1, 5, 4],
        [5, 4, 2],
        [4, 2, 0],
        [2, 0, 3],
        [0, 4, 2],
    ]


def test_random_start_spreads_leaders_evenly() -> None:
    assignment = assign_replicas({0: None, 1: None, 2: None}, 6, 3, rng=random.Random(7))
    assert Counter(replicas[0] for replicas in assignment) == {0: 2, 1: 2, 2: 2}
    assert all(sorted(replicas) == [0, 1, 2] for replicas in assignment)


def test_too_few_brokers_are_refused_partial_racks_ignored() -> None:
    with pytest.raises(InvalidReplicaAssignment) as refused:
        assign_replicas({0: None, 1: None, 2: None}, 6, 4)
    assert str(refused.value) == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
        "cannot be reached because only 3 broker(s) are registered."
    )
    # Racks on some brokers only are ignored (RackAwareMode.Safe).
    assert assign_replicas({0: "a", 1: None}, 2, 2, start_index=0, replica_shift=0) == [
        [0, 1],
        [1, 0],
    ]


def view(
    replicas: tuple[int, ...],
    state: zd.PartitionState | None,
    version: int = 3,
    unclean: bool = False,
) -> PartitionView:
    return PartitionView("t", 0, replicas, state, version, unclean)


def test_new_partition_leader_is_first_live_replica() -> None:
    assert decide([view((2, 1, 3), None)], {1, 3}, 5) == [
        StateWrite("t", 0, zd.PartitionState(1, 0, (1, 3), 5), None)
    ]
    assert decide([view((2,), None)], {1, 3}, 5) == []  # no live replica: decided later


def test_dead_leader_moves_to_first_live_isr_replica_with_a_bumped_epoch() -> None:
    state = zd.PartitionState(1, 4, (1, 2, 3), 2)
    assert decide([view((1, 3, 2), state)], {2, 3}, 7) == [
        StateWrite("t", 0, zd.PartitionState(3, 5, (2, 3), 7), 3)
    ]


def test_no_clean_candidate_goes_offline_unless_unclean_is_enabled() -> None:
    state = zd.PartitionState(1, 4, (1,), 2)
    offline = zd.PartitionState(zd.NO_LEADER, 5, (1,), 7)
    assert decide([view((1, 2), state)], {2}, 7) == [StateWrite("t", 0, offline, 3)]
    assert decide([view((1, 2), offline, 4)], {2}, 7) == []  # offline already
    assert decide([view((1, 2), state, unclean=True)], {2}, 7) == [
        StateWrite("t", 0, zd.PartitionState(2, 5, (2,), 7), 3, unclean=True)
    ]
    # The ISR member coming back leads again.
    assert decide([view((1, 2), offline, 4)], {1, 2}, 7) == [
        StateWrite("t", 0, zd.PartitionState(1, 6, (1,), 7), 4)
    ]


def test_live_leader_loses_dead_isr_members() -> None:
    state = zd.PartitionState(1, 4, (1, 2, 3), 2)
    assert decide([view((1, 2, 3), state)], {1, 2}, 7) == [
        StateWrite("t", 0, zd.PartitionState(1, 5, (1, 2), 7), 3)
    ]
    assert decide([view((1, 2, 3), state)], {1, 2, 3}, 7) == []
