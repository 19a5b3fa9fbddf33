"""The controller's elections on request, sans-IO: preferred and unclean (ElectLeaders' errors),
controlled shutdown moves, the automatic rebalance's choice, and what a stopping broker still
waits for."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.broker.partition import PartitionState as BrokerPartitionState
from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller_decisions import PartitionView, StateWrite
from kafkalite.cluster.leader_election import (
    PREFERRED,
    UNCLEAN,
    controlled_shutdown_writes,
    elect,
    partitions_to_rebalance,
    unknown_partition,
)

ALL = {1, 2, 3}
EPOCH = 7  # the controller's


def view(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), p: int = 0):
    return PartitionView("t", p, replicas, zd.PartitionState(leader, 4, isr, 1), zk_version=9)


def write(leader: int, isr: tuple[int, ...], p: int = 0) -> StateWrite:
    return StateWrite("t", p, zd.PartitionState(leader, 5, isr, EPOCH), expected_version=9)


def test_preferred_election() -> None:
    moved = elect(PREFERRED, view(2, (1, 2, 3)), ALL, set(), EPOCH)
    assert (moved.error, moved.message, moved.write) == (ErrorCode.none, None, write(1, (1, 2, 3)))
    not_needed = elect(PREFERRED, view(1, (1, 2)), ALL, set(), EPOCH)
    assert (not_needed.error, not_needed.message, not_needed.write) == (
        ErrorCode.election_not_needed,
        "Leader election not needed for topic partition.",
        None,
    )
    for unavailable in (
        elect(PREFERRED, view(2, (2, 3)), ALL, set(), EPOCH),  # not in the ISR
        elect(PREFERRED, view(2, (1, 2)), {2, 3}, set(), EPOCH),  # not live
        elect(PREFERRED, view(2, (1, 2)), ALL, {1}, EPOCH),  # shutting down
    ):
        assert (unavailable.error, unavailable.message, unavailable.write) == (
            ErrorCode.preferred_leader_not_available,
            "The preferred leader was not available.",
            None,
        )


def test_unclean_election() -> None:
    assert elect(UNCLEAN, view(2, (1, 2)), ALL, set(), EPOCH).error is (
        ErrorCode.election_not_needed
    )
    clean = elect(UNCLEAN, view(3, (3, 2)), {1, 2}, set(), EPOCH)  # the leader died
    assert clean.write == write(2, (2,))
    assert not clean.write.unclean
    dirty = elect(UNCLEAN, view(-1, (3,)), {1, 2}, set(), EPOCH)  # the ISR is gone: unclean
    assert dirty.write is not None and dirty.write.state == write(1, (1,)).state
    assert dirty.write.unclean  # counted in kafka_controller_controllerstats_uncleanleader...
    none = elect(UNCLEAN, view(-1, (3,)), {4}, set(), EPOCH)
    assert (none.error, none.message) == (
        ErrorCode.eligible_leaders_not_available,
        "Eligible topic partition leaders are not available.",
    )


def test_unknown_partition_messages() -> None:
    assert unknown_partition("gone", 0, topic_exists=False).message == "No such topic as gone"
    assert unknown_partition("t", 9, topic_exists=True).message == "No such partition as t-9"


def test_controlled_shutdown_moves_leaders_and_shrinks_isrs() -> None:
    views = [
        view(1, (1, 2, 3), p=0),  # led by the stopping broker: to the next ISR replica
        view(2, (2, 1, 3), (2, 1, 3), p=1),  # followed: leaves the ISR
        view(1, (1,), p=2),  # the only ISR member keeps leading
        view(3, (3, 2), p=3),  # not in the ISR: nothing to do
        view(1, (1,), (1,), p=4),  # a single replica: left alone
    ]
    assert controlled_shutdown_writes(views, ALL, {1}, EPOCH) == [
        write(2, (2, 3), p=0),
        write(2, (2, 3), p=1),
    ]
    # Two brokers stopping: neither is a candidate; without one the leader stays, alone.
    assert controlled_shutdown_writes([view(1, (1, 2, 3))], ALL, {1, 2}, EPOCH) == [write(3, (3,))]
    assert controlled_shutdown_writes([view(1, (1, 2))], ALL, {1, 2}, EPOCH) == [write(1, (1,))]


def test_rebalance_above_the_imbalance_threshold_only() -> None:
    # Broker 1 prefers 4 partitions and leads 3: 25% imbalance.
    views = [view(1, (1, 2, 3), p=p) for p in range(3)] + [view(2, (1, 2, 3), p=3)]
    assert partitions_to_rebalance(views, ALL, set(), 10) == [views[3]]
    assert partitions_to_rebalance(views, ALL, set(), 25) == []  # not above 25%
    assert partitions_to_rebalance(views, ALL, {1}, 10) == []  # shutting down: not preferred
    out_of_isr = [*views[:3], view(2, (2, 3), p=3)]
    assert partitions_to_rebalance(out_of_isr, ALL, set(), 10) == []


def state(p: int, leader: int, isr: tuple[int, ...], replicas=(1, 2, 3)) -> BrokerPartitionState:
    return BrokerPartitionState("t", p, replicas, leader, 3, isr)


def test_what_a_stopping_broker_still_waits_for() -> None:
    states = [
        state(0, 1, (1, 2, 3)),  # leads, others live: wait
        state(1, 2, (2, 1)),  # in a live leader's ISR: wait
        state(2, 2, (2, 3)),  # moved off already
        state(3, 1, (1,), (1,)),  # a single replica
        state(4, 3, (3, 1)),  # its leader is gone: the controller's business
    ]
    assert cs.remaining(1, states, {1, 2}) == [("t", 0), ("t", 1)]
    assert cs.remaining(1, [state(0, 1, (1, 2, 3))], {1}) == []  # nobody left to take over
    assert cs.remaining(1, states, set()) == []  # every broker stopping at once: no waiting


def test_request_znode() -> None:
    assert cs.request_path(3) == "/admin/controlled_shutdown/3"
    assert cs.decode(cs.encode_request(4294967298)) == cs.ShutdownRequest(4294967298, 1)
    assert cs.encode_request(5, 2) == b'{"version":1,"broker_epoch":5,"attempt":2}'
    assert cs.decode(b"garbage") is None
    assert cs.decode(b'{"version":1,"broker_epoch":5}') == cs.ShutdownRequest(5, 1)  # older


def test_answer_in_the_request_znode() -> None:
    answer = cs.Answer(7, ErrorCode.none, (("t", 0), ("u", 3)))
    answered = cs.ShutdownRequest(5, 2).answered(answer)
    assert answered.encode() == (
        b'{"version":1,"broker_epoch":5,"attempt":2,"answer":{"controller_epoch":7,'
        b'"error_code":0,"remaining_partitions":[["t",0],["u",3]]}}'
    )
    assert cs.decode(answered.encode()) == answered
    assert cs.decode(answered.encode()).broker_epoch == 5
