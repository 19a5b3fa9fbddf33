"""ElectLeaders (key 43), versions 0-2 (v0 always elects the preferred replica).

PREFERRED moves leadership to the first assigned replica when it is live and in the ISR;
UNCLEAN elects a leader for a partition without one, from outside the ISR when no ISR member
is live. The controller decides (cluster/election_zk.py, conditional ZooKeeper writes); any
other broker forwards the request to it, as Kafka's brokers do, and answers NOT_CONTROLLER
when it cannot. The controller answers once its own metadata shows the new leaders (Kafka's
DelayedElectLeader), REQUEST_TIMED_OUT for those that do not within the request's timeout.

Results as Kafka's controller gives them (ReplicationControlManager.electLeaders): per named
partition in request order; for a null topic list (every partition) each topic with only the
partitions that needed an election. A single node answers as a one-broker Kafka:
ELECTION_NOT_NEEDED for every existing partition.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.broker_connection import BrokerConnection, ConnectionLost
from kafkalite.broker.cluster_metadata import ClusterMetadata
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller_decisions import PartitionView
from kafkalite.cluster.leader_election import PREFERRED, UNCLEAN, Election, elect, unknown_partition
from kafkalite.protocol.entities import NO_THROTTLE, make, millis

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
FORWARDED = "kafkalite-forwarded"  # client id of a forwarded request: never forwarded again
NOT_CONTROLLER = Election(
    ErrorCode.not_controller, "This is not the correct controller for this cluster."
)
TIMED_OUT = Election(ErrorCode.request_timed_out, "The request timed out.")


def _requested(request: Any) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


def local_views(metadata: ClusterMetadata) -> dict[TopicPartition, PartitionView]:
    """The partitions as this broker's metadata knows them (a single node's own)."""
    views = {}
    for name in metadata.topics:
        for s in metadata.partition_states(name):
            state = zd.PartitionState(s.leader, s.leader_epoch, s.isr, s.controller_epoch)
            views[(name, s.partition)] = PartitionView(
                name, s.partition, s.replicas, state, s.partition_epoch
            )
    return views


def single_node_elections(
    metadata: ClusterMetadata, election_type: int, requested: list[TopicPartition] | None
) -> dict[TopicPartition, Election]:
    views = local_views(metadata)
    live = {b.broker_id for b in metadata.brokers()}
    results = {}
    for tp in sorted(views) if requested is None else requested:
        view = views.get(tp)
        if view is None:
            results[tp] = unknown_partition(tp[0], tp[1], tp[0] in metadata.topics)
        else:  # one replica, leading: nothing to elect
            results[tp] = elect(election_type, view, live, set(), 0)
    return results


async def _on_controller(
    ctx: RequestContext, election_type: int, requested: list[TopicPartition] | None, timeout: float
) -> dict[TopicPartition, Election] | None:
    """The elections, run here as the controller; None when this broker is not (or no longer)
    the controller."""
    from kafkalite.cluster import election_zk  # imports kazoo: cluster mode only
    from kafkalite.cluster.zk_client import ZkError
    from kafkalite.cluster.zk_metadata import ZkMetadata

    metadata = ctx.broker.metadata
    assert isinstance(metadata, ZkMetadata)
    controller = metadata.controller
    epoch = controller.epoch if controller is not None else None
    if controller is None or epoch is None:
        return None
    try:
        results = await election_zk.elect_leaders(controller.zk, epoch, election_type, requested)
    except ZkError as exc:  # ControllerMoved, or ZooKeeper out of reach
        log.info("ElectLeaders not run as controller: %s", exc)
        return None
    expected = {tp: e.write.state.leader for tp, e in results.items() if e.write is not None}

    def applied(tp: TopicPartition) -> bool:
        state = metadata.partition_state(*tp)
        return state is not None and state.leader == expected[tp]

    await metadata.wait_until(lambda: all(map(applied, expected)), timeout)
    return {tp: TIMED_OUT if tp in expected and not applied(tp) else e for tp, e in results.items()}


async def _forward(ctx: RequestContext, request: Any, timeout: float) -> Any | None:
    """The controller's answer to the same request; None when there is no controller to ask."""
    controller_id = ctx.broker.metadata.controller_id()
    endpoint = ctx.broker.endpoint_of(controller_id) if controller_id >= 0 else None
    if endpoint is None or controller_id == ctx.broker.node_id or ctx.client_id == FORWARDED:
        return None
    with trio.move_on_after(timeout):
        try:
            connection = await BrokerConnection.open(endpoint.host, endpoint.port, FORWARDED)
            try:
                return await connection.request(request)
            finally:
                await connection.aclose()
        except ConnectionLost as exc:
            log.info("ElectLeaders not forwarded to controller %d: %s", controller_id, exc)
    return None


def _partition_result(ctx: RequestContext, partition: int, election: Election) -> Any:
    return make(
        ctx.schema.PartitionResult,
        partition_id=partition,
        error_code=election.error,
        error_message=election.message,
    )


def _response(
    ctx: RequestContext,
    request: Any,
    results: Mapping[TopicPartition, Election],
    error: ErrorCode = ErrorCode.none,
) -> Any:
    """Kafka's: a named partition answered in request order; all partitions by topic, without
    those that needed no election."""
    if request.topic_partitions is None:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), election in sorted(results.items()):
            found = by_topic.setdefault(topic, [])
            if election.error is not ErrorCode.election_not_needed:
                found.append(_partition_result(ctx, partition, election))
        topics = list(by_topic.items())
    else:
        topics = [
            (t.topic, [_partition_result(ctx, p, results[(t.topic, p)]) for p in t.partitions])
            for t in request.topic_partitions
        ]
    return make(
        ctx.schema.ElectLeadersResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        replica_election_results=tuple(
            make(ctx.schema.ReplicaElectionResult, topic=topic, partition_result=tuple(found))
            for topic, found in topics
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    election_type = getattr(request, "election_type", PREFERRED)
    requested = _requested(request)
    if election_type not in (PREFERRED, UNCLEAN):
        invalid = Election(ErrorCode.invalid_request, f"Unknown election type {election_type}")
        return _error_response(ctx, request, invalid)
    metadata = ctx.broker.metadata
    if not ctx.broker.config.cluster_mode:
        return _response(ctx, request, single_node_elections(metadata, election_type, requested))
    timeout = max(millis(request.timeout), 0) / 1000
    results = await _on_controller(ctx, election_type, requested, timeout)
    if results is not None:
        return _response(ctx, request, results)
    forwarded = await _forward(ctx, request, ctx.broker.config.int("request.timeout.ms") / 1000)
    if forwarded is not None:
        return forwarded
    return _error_response(ctx, request, NOT_CONTROLLER)


def _error_response(ctx: RequestContext, request: Any, error: Election) -> Any:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error on top and on each partition
    named."""
    results = dict.fromkeys(_requested(request) or (), error)
    return _response(ctx, request, results, error.error)


API = ApiHandler(api_key=43, min_version=0, max_version=2, handle=handle, is_async=True)
