"""Partition reassignment decisions (kafkalite/cluster/reassignment.py), sans-IO."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.cluster import reassignment as r
from kafkalite.cluster import zk_data as zd

STEADY = zd.ReplicaAssignment((1, 2))
LIVE = {1, 2, 3}


def test_reassign_to_keeps_the_origin_and_adds_the_target() -> None:
    moving = r.reassign_to(STEADY, (2, 3))
    assert moving == zd.ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert r.origin(moving) == (2, 1)
    assert r.target(moving) == (2, 3)
    assert r.in_progress(moving)


def test_a_new_target_replaces_a_reassignment_in_progress_from_the_origin() -> None:
    moving = r.reassign_to(STEADY, (2, 3))
    assert r.reassign_to(moving, (1, 3)) == zd.ReplicaAssignment((1, 3, 2), (3,), (2,))


def test_cancel_goes_back_to_the_origin() -> None:
    moving = r.reassign_to(STEADY, (3,))
    assert r.requested(moving, None) == (1, 2)
    assert r.reassign_to(moving, r.requested(moving, None)) == STEADY


def test_the_current_assignment_is_no_move() -> None:
    assert r.reassign_to(STEADY, (1, 2)) == STEADY
    assert not r.in_progress(STEADY)


def test_validation_errors_as_kafka() -> None:
    invalid = ErrorCode.invalid_replica_assignment
    assert r.validate(STEADY, None, LIVE) == r.Refusal(ErrorCode.no_reassignment_in_progress, None)
    assert r.validate(r.reassign_to(STEADY, (3,)), None, LIVE) is None
    assert r.validate(STEADY, (), LIVE).error is invalid  # type: ignore[union-attr]
    duplicate = r.validate(STEADY, (2, 2), LIVE)
    assert duplicate == r.Refusal(
        invalid, "Duplicate replica ids in partition reassignment replica list: [2, 2]"
    )
    assert r.validate(STEADY, (1, -1), LIVE).error is invalid  # type: ignore[union-attr]
    dead = r.validate(STEADY, (1, 4), LIVE)
    assert dead == r.Refusal(
        invalid,
        "Replica assignment has brokers that are not alive. Replica list: [4],"
        " live broker list: [1, 2, 3]",
    )
    assert r.validate(STEADY, (2, 3), LIVE) is None
    assert r.validate(zd.ReplicaAssignment((1, 4)), (1,), LIVE) is None  # only new ones must live
    grow = r.validate(STEADY, (1, 2, 3), LIVE, allow_rf_change=False)
    assert grow == r.Refusal(
        ErrorCode.invalid_replication_factor, "The replication factor is changed from 2 to 3"
    )


def test_started_state_bumps_the_leader_epoch() -> None:
    state = zd.PartitionState(1, 4, (1, 2), 1)
    assert r.started_state(state, (2, 3, 1), LIVE, 3) == zd.PartitionState(1, 5, (1, 2), 3)


def test_started_state_drops_replicas_that_left_the_set() -> None:
    # A move [1, 2] -> [1, 3] replaced by [4, 5] before it completed: 3 leaves the ISR.
    state = zd.PartitionState(1, 4, (1, 2, 3), 1)
    assert r.started_state(state, (4, 5, 1, 2), {1, 2, 4, 5}, 3) == zd.PartitionState(
        1, 5, (1, 2), 3
    )
    # A leader outside the new set hands over to a live ISR member.
    led_by_3 = zd.PartitionState(3, 4, (3, 2), 1)
    assert r.started_state(led_by_3, (1, 2), LIVE, 3) == zd.PartitionState(2, 5, (2,), 3)


def test_completion_waits_for_every_target_replica_in_the_isr() -> None:
    moving = r.reassign_to(STEADY, (2, 3))
    assert r.completion(moving, zd.PartitionState(1, 5, (1, 2), 3), LIVE, 3) is None


def test_completion_moves_leadership_off_a_removed_leader() -> None:
    moving = r.reassign_to(STEADY, (2, 3))
    final, state = r.completion(moving, zd.PartitionState(1, 5, (1, 2, 3), 3), LIVE, 4)  # type: ignore[misc]
    assert final == zd.ReplicaAssignment((2, 3))
    assert state == zd.PartitionState(2, 6, (2, 3), 4)


def test_completion_keeps_a_leader_that_stays() -> None:
    moving = r.reassign_to(STEADY, (1, 3))
    final, state = r.completion(moving, zd.PartitionState(1, 5, (1, 2, 3), 3), LIVE, 3)  # type: ignore[misc]
    assert final == zd.ReplicaAssignment((1, 3))
    assert state == zd.PartitionState(1, 6, (1, 3), 3)


def test_completion_elects_a_live_target_replica_when_the_leader_is_dead() -> None:
    moving = r.reassign_to(STEADY, (1, 3))
    step = r.completion(moving, zd.PartitionState(1, 5, (1, 2, 3), 3), {2, 3}, 3)
    assert step is not None and step[1].leader == 3
