"""ElectLeaders (key 43), versions 0-2 (v0 always elects the preferred replica).

PREFERRED moves leadership to the first assigned replica when it is live and in the ISR;
UNCLEAN elects a leader for a partition without one, from outside the ISR when no ISR member
is live. The controller decides (broker/controller_api.py); any other broker forwards the
request to it, as Kafka's brokers do, and answers NOT_CONTROLLER when it cannot. The
controller answers once its own metadata shows the new leaders (Kafka's DelayedElectLeader),
REQUEST_TIMED_OUT for those that do not within the request's timeout.

Results as Kafka's controller gives them (ReplicationControlManager.electLeaders): per named
partition in request order; for a null topic list (every partition) each topic with only the
partitions that needed an election. A single node answers as a one-broker Kafka:
ELECTION_NOT_NEEDED for every existing partition.

Authorization as Kafka's: ALTER on the cluster. A request another broker forwarded was
checked there for the client's ALTER; the controller asks the forwarding broker's principal
for CLUSTER_ACTION, as Kafka asks it of an Envelope's sender.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.broker_connection import BrokerConnection, ConnectionLost
from kafkalite.broker.controller_api import (
    NOT_CONTROLLER,
    PREFERRED,
    UNCLEAN,
    ApiError,
    NotController,
    TopicPartition,
)
from kafkalite.broker.replica_fetcher_manager import inter_broker_endpoint
from kafkalite.protocol.entities import NO_THROTTLE, make, millis
from kafkalite.security.acl import AclOperation
from kafkalite.security.inter_broker import inter_broker_security

log = logging.getLogger(__name__)
FORWARDED = "kafkalite-forwarded"  # client id of a forwarded request: never forwarded again


def _requested(request: Any) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


async def _forward(ctx: RequestContext, request: Any, timeout: float) -> Any | None:
    """The controller's answer to the same request; None when there is no controller to ask."""
    config, metadata = ctx.broker.config, ctx.broker.metadata
    controller_id = metadata.controller_id()
    endpoint = inter_broker_endpoint(config, metadata, controller_id)
    if endpoint is None or controller_id == ctx.broker.node_id or ctx.client_id == FORWARDED:
        return None
    with trio.move_on_after(timeout):
        try:
            connection = await BrokerConnection.open(
                endpoint.host, endpoint.port, FORWARDED, inter_broker_security(config)
            )
            try:
                return await connection.request(request)
            finally:
                await connection.aclose()
        except ConnectionLost as exc:
            log.info("ElectLeaders not forwarded to controller %d: %s", controller_id, exc)
    return None


def _partition_result(ctx: RequestContext, partition: int, election: ApiError) -> Any:
    return make(
        ctx.schema.PartitionResult,
        partition_id=partition,
        error_code=election.error,
        error_message=election.message,
    )


def _response(
    ctx: RequestContext,
    request: Any,
    results: Mapping[TopicPartition, ApiError],
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
        invalid = ApiError(ErrorCode.invalid_request, f"Unknown election type {election_type}")
        return _error_response(ctx, request, invalid)
    if not _authorized(ctx):
        denied = ApiError(ErrorCode.cluster_authorization_failed)
        return _error_response(ctx, request, denied)
    timeout = max(millis(request.timeout), 0) / 1000
    try:
        results = await ctx.broker.controller.elect_leaders(election_type, requested, timeout)
    except NotController:
        request_timeout = ctx.broker.config.int("request.timeout.ms") / 1000
        forwarded = await _forward(ctx, request, request_timeout)
        return forwarded if forwarded is not None else _error_response(ctx, request, NOT_CONTROLLER)
    return _response(ctx, request, results)


def _authorized(ctx: RequestContext) -> bool:
    if ctx.client_id == FORWARDED:
        return ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    return ctx.authorized_cluster(AclOperation.ALTER)


def _error_response(ctx: RequestContext, request: Any, error: ApiError) -> Any:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error on top and on each partition
    named."""
    results = dict.fromkeys(_requested(request) or (), error)
    return _response(ctx, request, results, error.error)


API = ApiHandler(api_key=43, min_version=0, max_version=2, handle=handle, is_async=True)
