"""The controller's side of a controlled shutdown (Kafka's KafkaController.doControlledShutdown),
run in each controller round.

For every request of a live registration's broker epoch (cluster/controlled_shutdown.py) the
controller moves the leaderships of the stopping brokers to other ISR members and takes them
out of the ISR of the partitions they follow (leader_election.controlled_shutdown_writes), then
answers each request not yet answered: the partitions still left on that broker (Kafka's
partitionLeadersOnBroker), written into the request's znode behind the controller epoch. The
broker waits for that answer however long the moves take; it only asks again when this
controller is gone. Writes a leader's ISR change got to first are re-read and decided again at
once, rather than left for the next round: the stopping broker stopped fetching, so its
leaders are shrinking their ISRs just then. Reads and writes go out together (ZooKeeper
pipelines them), as Kafka's controller batches its ZooKeeper requests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Set
from dataclasses import replace

from kio.schema.errors import ErrorCode

from kafkalite.broker.partition import PartitionState
from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller_decisions import PartitionView
from kafkalite.cluster.election_zk import (
    PendingRequest,
    gather,
    read_requests,
    read_state,
    read_views,
    registrations,
    stopping_brokers,
    write_state,
)
from kafkalite.cluster.kafka_zk import (
    ControllerEpoch,
    ControllerMoved,
)
from kafkalite.cluster.leader_election import controlled_shutdown_writes
from kafkalite.cluster.zk_client import (
    BadVersion,
    CheckOp,
    NoNode,
    SetDataOp,
    ZkClient,
    ZkWatch,
)

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
MAX_ATTEMPTS = 10  # per round, when leaders' ISR changes keep coming first


async def do_controlled_shutdowns(
    zk: ZkClient, epoch: ControllerEpoch, live: Set[int]
) -> list[ZkWatch]:
    """One pass of the controller's round: the stopping brokers' partitions moved, their
    requests answered; the watch on the requests."""
    requests, watch = await read_requests(zk)
    pending = [r for r in requests if not _answered(r, epoch)]
    if not pending:
        return [watch]
    brokers = await registrations(zk)
    stopping = stopping_brokers(requests, brokers)
    views = await move_off(zk, epoch, set(live), stopping) if stopping else {}
    available = set(live) - stopping
    for request in pending:
        if request.broker_id in stopping:
            left = cs.remaining(request.broker_id, _states(views.values()), available)
            answer = cs.Answer(epoch.epoch, ErrorCode.none, tuple(left))
        else:  # an old registration's request (the broker re-registered meanwhile)
            answer = cs.Answer(epoch.epoch, ErrorCode.stale_broker_epoch, ())
        await answer_request(zk, epoch, request, answer)
    return [watch]


def _answered(pending: PendingRequest, epoch: ControllerEpoch) -> bool:
    """Answered by this controller (a new controller answers again: its moves are its own)."""
    answer = pending.request.answer
    return answer is not None and answer.controller_epoch == epoch.epoch


async def move_off(
    zk: ZkClient, epoch: ControllerEpoch, live: set[int], stopping: set[int]
) -> dict[TopicPartition, PartitionView]:
    """Leaderships and ISR memberships moved off `stopping`; the partitions they hold a
    replica of, as they are now."""
    views = await read_views(zk, brokers=stopping)
    why = f"controlled shutdown of {sorted(stopping)}"
    for _ in range(MAX_ATTEMPTS):
        writes = controlled_shutdown_writes(views.values(), live, stopping, epoch.epoch)
        if not writes:
            break
        versions = await gather(lambda w: write_state(zk, epoch, w, why), writes)
        stale = []
        for write, version in zip(writes, versions, strict=True):
            tp = (write.topic, write.partition)
            if version is None:
                stale.append(tp)
            else:
                views[tp] = replace(views[tp], state=write.state, zk_version=version)
        for view in await gather(lambda tp: read_state(zk, views[tp]), stale):
            views[(view.topic, view.partition)] = view
    return views


async def answer_request(
    zk: ZkClient, epoch: ControllerEpoch, pending: PendingRequest, answer: cs.Answer
) -> None:
    """Kafka's ControlledShutdownResponse, onto the request read (not a newer one of the
    broker's), behind the controller epoch."""
    path = cs.request_path(pending.broker_id)
    data = pending.request.answered(answer).encode()
    fence = CheckOp(zd.CONTROLLER_EPOCH, epoch.zk_version)
    try:
        await zk.multi([fence, SetDataOp(path, data, pending.zk_version)])
    except BadVersion as exc:
        if exc.op_index == 0:
            raise ControllerMoved(f"controller epoch {epoch.epoch} was superseded") from None
        return  # asked again meanwhile: the watch brings the new request
    except NoNode:
        return  # the broker is gone
    log.info(
        "controlled shutdown of broker %d: %s, %d partition(s) remaining",
        pending.broker_id,
        answer.error.name,
        len(answer.remaining),
    )


def _states(views: Iterable[PartitionView]) -> list[PartitionState]:
    return [
        PartitionState(v.topic, v.partition, v.replicas, v.state.leader, 0, v.state.isr)
        for v in views
        if v.state is not None
    ]
