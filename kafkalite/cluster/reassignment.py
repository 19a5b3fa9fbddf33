"""Partition reassignment, as Kafka's ZooKeeper-era controller does it (onPartitionReassignment).

The topic znode carries, per partition, the full replica set RS = origin + target with
`adding_replicas` (AR = target - origin) and `removing_replicas` (RR = origin - target):

* start (AlterPartitionReassignments on the controller): the assignment becomes RS/AR/RR and the
  leader epoch is bumped, in one transaction behind the controller epoch and both znodes'
  versions. Every replica of RS replicates (brokers create a replica for each id in RS);
* complete, once every target replica is in the ISR: the leader moves to a target replica if it
  is being removed (or is not live), the ISR keeps only target replicas, the leader epoch is
  bumped and the assignment becomes the target alone; the removed replicas' brokers see
  themselves gone from the assignment and delete their local replica (StopReplica with delete);
* cancel (null replicas): a reassignment to the origin replicas, so it completes (or waits) the
  same way and the added replicas leave.

The decisions, sans-IO (unit-tested); cluster/reassignment_zk.py makes the ZooKeeper writes.
The checks of a request are broker/controller_api.py's, which the single node uses too.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from kafkalite.broker.controller_api import ApiError, check_reassignment
from kafkalite.cluster import zk_data as zd

Refusal = ApiError  # per partition, why a move is refused


def origin(assignment: zd.ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in assignment.replicas if r not in assignment.adding_replicas)


def target(assignment: zd.ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in assignment.replicas if r not in assignment.removing_replicas)


def in_progress(assignment: zd.ReplicaAssignment) -> bool:
    return bool(assignment.adding_replicas or assignment.removing_replicas)


def reassign_to(current: zd.ReplicaAssignment, new_target: Iterable[int]) -> zd.ReplicaAssignment:
    """Kafka's ReplicaAssignment.reassignTo: RS = (target ++ origin).distinct."""
    wanted = tuple(new_target)
    before = origin(current)
    full = tuple(dict.fromkeys((*wanted, *before)))
    return zd.ReplicaAssignment(
        full,
        tuple(r for r in full if r not in before),
        tuple(r for r in before if r not in wanted),
    )


def validate(
    current: zd.ReplicaAssignment,
    replicas: tuple[int, ...] | None,
    live: Set[int],
    allow_rf_change: bool = True,
) -> Refusal | None:
    """broker/controller_api.check_reassignment on the partition's current move."""
    return check_reassignment(
        origin(current), target(current), in_progress(current), replicas, live, allow_rf_change
    )


def requested(current: zd.ReplicaAssignment, replicas: tuple[int, ...] | None) -> tuple[int, ...]:
    """The target of a (validated) request: the origin for a cancellation."""
    return origin(current) if replicas is None else replicas


def started_state(
    state: zd.PartitionState, replicas: Iterable[int], live: Set[int], controller_epoch: int
) -> zd.PartitionState:
    """Phase A1: the leader epoch bumped, so every replica of the new set `replicas` applies
    it. The ISR keeps only members of the set (a replaced move's added replicas leave it), and
    a leader outside the set hands over to a live ISR member (none: offline, ISR kept)."""
    members = set(replicas)
    isr = tuple(r for r in state.isr if r in members)
    leader = state.leader
    if leader not in members:
        leader = next((r for r in isr if r in live), zd.NO_LEADER)
    return zd.PartitionState(leader, state.leader_epoch + 1, isr or state.isr, controller_epoch)


def completion(
    assignment: zd.ReplicaAssignment,
    state: zd.PartitionState,
    live: Set[int],
    controller_epoch: int,
) -> tuple[zd.ReplicaAssignment, zd.PartitionState] | None:
    """Phase B, once every target replica is in the ISR: the final assignment and state; None
    while a target replica is still catching up (or no target replica can lead)."""
    final = target(assignment)
    if not set(final) <= set(state.isr):
        return None
    isr = tuple(r for r in state.isr if r in final)
    if state.leader in final and state.leader in live:
        leader = state.leader
    else:
        leader = next((r for r in final if r in isr and r in live), zd.NO_LEADER)
        if leader == zd.NO_LEADER:
            return None
    new_state = zd.PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)
    return zd.ReplicaAssignment(final), new_state
