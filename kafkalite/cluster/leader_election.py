"""Leader elections a controller runs on request, sans-IO: preferred, unclean, controlled
shutdown and the automatic preferred-leader rebalance (Kafka's PartitionLeaderElectionAlgorithms
and KafkaController.checkAndTriggerAutoLeaderRebalance).

Every function takes what ZooKeeper holds (`PartitionView`: assignment, state, znode version),
the live brokers and the brokers in controlled shutdown (never elected, as Kafka's
`liveBrokerIds` leaves them out), and answers state writes conditional on the version read.
Per-partition outcomes carry the error and message Kafka's ElectLeaders answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalite.broker import controller_api
from kafkalite.broker.controller_api import PREFERRED as PREFERRED  # re-exported
from kafkalite.broker.controller_api import UNCLEAN
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller_decisions import PartitionView, StateWrite, elect_leader


@dataclass(frozen=True, slots=True)
class Election:
    """One partition's outcome: a write to make (error NONE) or why there is none."""

    error: ErrorCode
    message: str | None = None
    write: StateWrite | None = None


NOT_NEEDED = Election(
    ErrorCode.election_not_needed, "Leader election not needed for topic partition."
)
PREFERRED_NOT_AVAILABLE = Election(
    ErrorCode.preferred_leader_not_available, "The preferred leader was not available."
)
ELIGIBLE_NOT_AVAILABLE = Election(
    ErrorCode.eligible_leaders_not_available,
    "Eligible topic partition leaders are not available.",
)


def unknown_partition(topic: str, partition: int, topic_exists: bool) -> Election:
    unknown = controller_api.unknown_partition(topic, partition, topic_exists)
    return Election(unknown.error, unknown.message)


def _new_state(view: PartitionView, leader: int, isr: Iterable[int], epoch: int) -> StateWrite:
    assert view.state is not None
    state = zd.PartitionState(leader, view.state.leader_epoch + 1, tuple(isr), epoch)
    unclean = leader not in view.state.isr
    return StateWrite(view.topic, view.partition, state, view.zk_version, unclean)


def has_leader(view: PartitionView, live: Set[int]) -> bool:
    return view.state is not None and view.state.leader in live


def elect_preferred(
    view: PartitionView, live: Set[int], shutting_down: Set[int], controller_epoch: int
) -> Election:
    """The first assigned replica, if it is live, not shutting down and in the ISR (Kafka's
    preferredReplicaPartitionLeaderElection); the ISR is kept."""
    state = view.state
    preferred = view.replicas[0] if view.replicas else zd.NO_LEADER
    if state is None:
        return PREFERRED_NOT_AVAILABLE
    if state.leader == preferred:
        return NOT_NEEDED
    if preferred not in live or preferred in shutting_down or preferred not in state.isr:
        return PREFERRED_NOT_AVAILABLE
    write = _new_state(view, preferred, state.isr, controller_epoch)
    return Election(ErrorCode.none, None, write)


def elect_unclean(
    view: PartitionView, live: Set[int], shutting_down: Set[int], controller_epoch: int
) -> Election:
    """For a partition without a live leader: the first live ISR replica, else (unclean) the
    first live replica, alone in the ISR (Kafka's offline election with unclean allowed)."""
    state = view.state
    if state is None:
        return ELIGIBLE_NOT_AVAILABLE
    if has_leader(view, live):
        return NOT_NEEDED
    leader, isr = elect_leader(view.replicas, state.isr, set(live) - set(shutting_down), True)
    if leader == zd.NO_LEADER:
        return ELIGIBLE_NOT_AVAILABLE
    return Election(ErrorCode.none, None, _new_state(view, leader, isr, controller_epoch))


def elect(
    election_type: int,
    view: PartitionView,
    live: Set[int],
    shutting_down: Set[int],
    controller_epoch: int,
) -> Election:
    chosen = elect_unclean if election_type == UNCLEAN else elect_preferred
    return chosen(view, live, shutting_down, controller_epoch)


def controlled_shutdown_writes(
    views: Iterable[PartitionView], live: Set[int], shutting_down: Set[int], controller_epoch: int
) -> list[StateWrite]:
    """Kafka's doControlledShutdown: a partition led by a shutting-down broker moves to the first
    assigned replica that is live, in the ISR and not shutting down
    (ControlledShutdownPartitionLeaderElectionStrategy), the shutting-down brokers leaving the
    ISR; a live leader's ISR loses its shutting-down followers. A partition with no other
    candidate keeps its leader (its shutting-down followers still leave the ISR). Single-replica
    partitions are left alone."""
    writes = []
    for view in views:
        state = view.state
        if state is None or len(view.replicas) < 2 or state.leader not in live:
            continue
        isr = tuple(r for r in state.isr if r not in shutting_down)
        candidates = [r for r in view.replicas if r in isr and r in live]
        if state.leader in shutting_down and candidates:
            writes.append(_new_state(view, candidates[0], isr, controller_epoch))
            continue
        kept = tuple(r for r in state.isr if r == state.leader or r not in shutting_down)
        if kept != state.isr:
            writes.append(_new_state(view, state.leader, kept, controller_epoch))
    return writes


def partitions_to_rebalance(
    views: Iterable[PartitionView],
    live: Set[int],
    shutting_down: Set[int],
    imbalance_percentage: int,
) -> list[PartitionView]:
    """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, the share of its
    partitions led by another broker; above `leader.imbalance.per.broker.percentage`, the ones
    whose preferred replica can lead now get it back."""
    by_preferred: dict[int, list[PartitionView]] = {}
    for view in views:
        if view.replicas and view.state is not None:
            by_preferred.setdefault(view.replicas[0], []).append(view)
    chosen = []
    for preferred, owned in sorted(by_preferred.items()):
        elsewhere = [v for v in owned if v.state is not None and v.state.leader != preferred]
        if len(elsewhere) / len(owned) <= imbalance_percentage / 100:
            continue
        chosen += [
            v for v in elsewhere if elect_preferred(v, live, shutting_down, 0).write is not None
        ]
    return chosen
