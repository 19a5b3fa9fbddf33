"""The controller's elections on request, against ZooKeeper: ElectLeaders and the automatic
preferred-leader rebalance (the moves of a controlled shutdown:
controlled_shutdown_controller.py).

Each reads what it needs from ZooKeeper (live registrations with their broker epochs, the
controlled-shutdown requests, assignments and partition states with their versions), decides
with the sans-IO cluster/leader_election.py and writes each new state conditionally on the
version read, behind the controller epoch (KafkaZkClient.set_partition_state): it runs beside
the controller's rounds, and whichever writes second re-reads and decides again. A deposed
controller's write raises ControllerMoved.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence, Set
from dataclasses import dataclass, replace
from typing import TypeVar

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.views import VIEW_SOURCE
from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller_decisions import PartitionView, StateWrite
from kafkalite.cluster.kafka_zk import (
    ControllerEpoch,
    KafkaZkClient,
    StalePartitionState,
)
from kafkalite.cluster.leader_election import (
    PREFERRED,
    Election,
    elect,
    partitions_to_rebalance,
    unknown_partition,
)
from kafkalite.cluster.zk_client import NoNode, ZkClient, ZkWatch

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
MAX_ATTEMPTS = 5  # per partition, when leaders' ISR changes keep coming first


async def registrations(zk: ZkClient) -> dict[int, int]:
    """Live broker id -> broker epoch (the czxid of `/brokers/ids/<id>`, Kafka's)."""
    brokers = {}
    for name in await zk.children(zd.BROKER_IDS):
        stat = await zk.exists(zd.broker_path(int(name)))
        if stat is not None:
            brokers[int(name)] = stat.czxid
    return brokers


async def shutdown_requests(zk: ZkClient, brokers: dict[int, int]) -> tuple[set[int], ZkWatch]:
    """The brokers in controlled shutdown (a request of their live registration's epoch), and
    a watch on the requests."""
    requests, watch = await read_requests(zk)
    return stopping_brokers(requests, brokers), watch


def stopping_brokers(requests: Iterable[PendingRequest], brokers: dict[int, int]) -> set[int]:
    """Those whose request carries the epoch of their live registration."""
    return {r.broker_id for r in requests if brokers.get(r.broker_id) == r.request.broker_epoch}


async def read_requests(zk: ZkClient) -> tuple[list[PendingRequest], ZkWatch]:
    while True:
        try:
            names, watch = await zk.children_watch(cs.REQUESTS)
            break
        except NoNode:
            await zk.ensure_path(cs.REQUESTS)

    async def read(broker_id: int) -> PendingRequest | None:
        try:
            data, stat = await zk.get(cs.request_path(broker_id))
        except NoNode:
            return None  # the broker stopped (or asked again) meanwhile
        request = cs.decode(data)
        return None if request is None else PendingRequest(broker_id, request, stat.version)

    found = await gather(read, [int(name) for name in names if name.isdigit()])
    return [r for r in found if r is not None], watch


async def read_views(
    zk: ZkClient, topics: Iterable[str] | None = None, brokers: Set[int] | None = None
) -> dict[TopicPartition, PartitionView]:
    """The partitions of `topics` (None: every topic), only those with a replica on
    `brokers` if given, with their states and znode versions (read all at once)."""
    names = list(topics) if topics is not None else await zk.children(zd.TOPICS)
    assignments = await gather(KafkaZkClient(zk).topic_assignment, names)
    placed = [
        PartitionView(topic, index, replicas.replicas, None)
        for topic, assignment in zip(names, assignments, strict=True)
        if assignment is not None
        for index, replicas in sorted(assignment.partitions.items())
        if brokers is None or set(replicas.replicas) & brokers
    ]
    found = await gather(lambda view: read_state(zk, view), placed)
    return {(v.topic, v.partition): v for v in found}


async def read_state(zk: ZkClient, view: PartitionView) -> PartitionView:
    current = await KafkaZkClient(zk).partition_state(view.topic, view.partition)
    if current is None:
        return replace(view, state=None, zk_version=-1)
    return replace(view, state=current.state, zk_version=current.zk_version)


@dataclass(frozen=True, slots=True)
class PendingRequest:
    broker_id: int
    request: cs.ShutdownRequest
    zk_version: int  # of the request znode: the answer is written only onto this request


async def gather(function: Callable[[T], Awaitable[R]], items: Iterable[T]) -> list[R]:
    """`function` on every item at once (ZooKeeper requests pipelined), results in order."""
    items = list(items)
    results: list[R | None] = [None] * len(items)

    async def one(index: int, item: T) -> None:
        results[index] = await function(item)

    async with trio.open_nursery() as nursery:
        for index, item in enumerate(items):
            nursery.start_soon(one, index, item)
    return results  # type: ignore[return-value]  # every slot is filled


async def write_state(
    zk: ZkClient, epoch: ControllerEpoch, write: StateWrite, why: str
) -> int | None:
    """The state znode's new version; None when the state moved on since it was read."""
    assert write.expected_version is not None
    try:
        version = await KafkaZkClient(zk).set_partition_state(
            write.topic, write.partition, write.state, write.expected_version, epoch
        )
    except (StalePartitionState, NoNode):
        return None
    state = write.state
    log.info(
        "%s-%d (%s): leader %d, leader epoch %d, ISR %s",
        write.topic,
        write.partition,
        why,
        state.leader,
        state.leader_epoch,
        list(state.isr),
    )
    return version


# -- ElectLeaders ------------------------------------------------------------------------------


async def elect_leaders(
    zk: ZkClient,
    epoch: ControllerEpoch,
    election_type: int,
    partitions: Sequence[TopicPartition] | None,
) -> dict[TopicPartition, Election]:
    """Kafka's ElectLeaders on the controller: every partition named (None: all of them)."""
    brokers = await registrations(zk)
    stopping, _ = await shutdown_requests(zk, brokers)
    live = set(brokers)
    all_topics = set(await zk.children(zd.TOPICS))
    wanted_topics = all_topics if partitions is None else {t for t, _ in partitions} & all_topics
    kafka_zk = KafkaZkClient(zk)
    filtered = {  # views (issue 18): led where their sources are, never elected
        t for t in wanted_topics if VIEW_SOURCE in await kafka_zk.entity_config("topics", t)
    }
    views = await read_views(zk, sorted(wanted_topics - filtered))
    results: dict[TopicPartition, Election] = {}
    for tp in sorted(views) if partitions is None else partitions:
        view = views.get(tp)
        if tp[0] in filtered:
            results[tp] = Election(
                ErrorCode.election_not_needed, f"{tp[0]} is a view: its source's leaders serve it."
            )
            continue
        if view is None:
            results[tp] = unknown_partition(tp[0], tp[1], tp[0] in all_topics)
            continue
        for _ in range(MAX_ATTEMPTS):
            result = elect(election_type, view, live, stopping, epoch.epoch)
            if result.write is None:
                break
            if await write_state(zk, epoch, result.write, "leader election") is not None:
                break
            view = await read_state(zk, view)
        results[tp] = result
    return results


# -- automatic preferred leader rebalance ------------------------------------------------------


async def rebalance(zk: ZkClient, epoch: ControllerEpoch, imbalance_percentage: int) -> int:
    """One check of Kafka's auto leader rebalance; the partitions moved back."""
    brokers = await registrations(zk)
    stopping, _ = await shutdown_requests(zk, brokers)
    views = await read_views(zk)
    live, moved = set(brokers), 0
    for view in partitions_to_rebalance(views.values(), live, stopping, imbalance_percentage):
        result = elect(PREFERRED, view, live, stopping, epoch.epoch)
        if result.write is None:
            continue
        if await write_state(zk, epoch, result.write, "preferred leader rebalance") is not None:
            moved += 1
    return moved
