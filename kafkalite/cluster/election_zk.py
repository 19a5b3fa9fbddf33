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
from collections.abc import Iterable, Sequence

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
    while True:
        try:
            names, watch = await zk.children_watch(cs.REQUESTS)
            break
        except NoNode:
            await zk.ensure_path(cs.REQUESTS)
    stopping = set()
    for name in filter(str.isdigit, names):
        try:
            data, _ = await zk.get(cs.request_path(int(name)))
        except NoNode:
            continue
        if brokers.get(int(name)) == cs.decode_request(data):
            stopping.add(int(name))
    return stopping, watch


async def read_views(zk: ZkClient, topics: Iterable[str]) -> dict[TopicPartition, PartitionView]:
    kafka_zk = KafkaZkClient(zk)
    views = {}
    for topic in topics:
        assignment = await kafka_zk.topic_assignment(topic)
        if assignment is None:
            continue
        for index, replicas in sorted(assignment.partitions.items()):
            current = await kafka_zk.partition_state(topic, index)
            views[(topic, index)] = PartitionView(
                topic,
                index,
                replicas.replicas,
                current.state if current else None,
                current.zk_version if current else -1,
            )
    return views


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
    views = await read_views(zk, sorted(wanted_topics))
    results = {}
    for tp in sorted(views) if partitions is None else partitions:
        view = views.get(tp)
        if view is None:
            results[tp] = unknown_partition(tp[0], tp[1], tp[0] in all_topics)
            continue
        for _ in range(MAX_ATTEMPTS):
            result = elect(election_type, view, live, stopping, epoch.epoch)
            if result.write is None:
                break
            if await write_state(zk, epoch, result.write, "leader election") is not None:
                break
            view = (await read_views(zk, [tp[0]]))[tp]
        results[tp] = result
    return results


# -- automatic preferred leader rebalance ------------------------------------------------------


async def rebalance(zk: ZkClient, epoch: ControllerEpoch, imbalance_percentage: int) -> int:
    """One check of Kafka's auto leader rebalance; the partitions moved back."""
    brokers = await registrations(zk)
    stopping, _ = await shutdown_requests(zk, brokers)
    views = await read_views(zk, await zk.children(zd.TOPICS))
    live, moved = set(brokers), 0
    for view in partitions_to_rebalance(views.values(), live, stopping, imbalance_percentage):
        result = elect(PREFERRED, view, live, stopping, epoch.epoch)
        if result.write is None:
            continue
        if await write_state(zk, epoch, result.write, "preferred leader rebalance") is not None:
            moved += 1
    return moved
