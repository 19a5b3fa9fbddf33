"""The controller's decisions, sans-IO (Kafka's PartitionStateMachine and its elections).

Given what ZooKeeper holds (each partition's assignment and state with its znode version) and
the live brokers, `decide` answers the state writes to make, each conditional on the version
read, with the controller's epoch inside:

* a new partition (no state yet): leader = the first live replica, ISR = the live replicas,
  leader epoch 0 (none live: no state yet, decided again when a replica registers);
* a partition whose leader is not live: the first live replica of the assignment that is in
  the ISR (Kafka's offlinePartitionLeaderElection); outside the ISR only with
  `unclean.leader.election.enable` for that topic (the ISR becomes the new leader alone); no
  candidate: leader -1 and the partition offline, ISR kept; the leader epoch bumped;
* a live leader with dead ISR members: they leave the ISR and the leader epoch is bumped (the
  controller's removeReplicasFromIsr on a broker failure).
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from kafkalite.cluster import zk_data as zd


@dataclass(frozen=True, slots=True)
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    state: zd.PartitionState | None  # None: the state znode does not exist yet
    zk_version: int = -1
    unclean_election: bool = False


@dataclass(frozen=True, slots=True)
class StateWrite:
    topic: str
    partition: int
    state: zd.PartitionState
    expected_version: int | None  # None: create the state znode
    unclean: bool = False  # a leader from outside the ISR (Kafka's UncleanLeaderElectionsPerSec)


def decide(
    partitions: Iterable[PartitionView], live: Set[int], controller_epoch: int
) -> list[StateWrite]:
    writes = []
    for view in partitions:
        write = _decide_one(view, live, controller_epoch)
        if write is not None:
            writes.append(write)
    return writes


def _decide_one(view: PartitionView, live: Set[int], controller_epoch: int) -> StateWrite | None:
    live_replicas = tuple(r for r in view.replicas if r in live)
    current = view.state
    if current is None:
        if not live_replicas:
            return None
        state = zd.PartitionState(live_replicas[0], 0, live_replicas, controller_epoch)
        return StateWrite(view.topic, view.partition, state, None)
    if current.leader in live:
        isr = tuple(r for r in current.isr if r in live)
        if isr == current.isr:
            return None
        state = zd.PartitionState(
            current.leader, current.leader_epoch + 1, isr or (current.leader,), controller_epoch
        )
        return StateWrite(view.topic, view.partition, state, view.zk_version)
    leader, isr = elect_leader(view.replicas, current.isr, live, view.unclean_election)
    if leader == zd.NO_LEADER and current.leader == zd.NO_LEADER:
        return None  # offline already: nothing new
    state = zd.PartitionState(leader, current.leader_epoch + 1, isr, controller_epoch)
    unclean = leader != zd.NO_LEADER and leader not in current.isr
    return StateWrite(view.topic, view.partition, state, view.zk_version, unclean)


def elect_leader(
    replicas: tuple[int, ...], isr: tuple[int, ...], live: Set[int], unclean: bool
) -> tuple[int, tuple[int, ...]]:
    """The new leader and ISR for a partition whose leader is gone."""
    live_isr = tuple(r for r in isr if r in live)
    clean = next((r for r in replicas if r in live_isr), None)
    if clean is not None:
        return clean, live_isr
    if unclean:
        dirty = next((r for r in replicas if r in live), None)
        if dirty is not None:
            return dirty, (dirty,)
    return zd.NO_LEADER, isr
