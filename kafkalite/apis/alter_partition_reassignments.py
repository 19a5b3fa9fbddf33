"""AlterPartitionReassignments (key 45), versions 0-1 (`kafka-reassign-partitions --execute`).

Answered by the controller, as Kafka's ZooKeeper-era brokers did: another broker answers
NOT_CONTROLLER (the client finds the controller in Metadata and asks it). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicate, negative or not live
new replicas), NO_REASSIGNMENT_IN_PROGRESS for a cancellation (null replicas) of a partition
that is not moving, and from v1 INVALID_REPLICATION_FACTOR when the replica count changes with
allow_replication_factor_change false (KIP-860), INVALID_REQUEST for a view's partitions (a
view has its source's replicas). The controller (broker/controller_api.py)
starts the moves and completes them once the new replicas are in sync. A single node is its own
controller with one live broker: only its current assignment is valid, and that is no move.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker import views
from kafkalite.broker.controller_api import NOT_CONTROLLER, ApiError, Targets
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation

Results = dict[int, ApiError]  # per partition: NONE when accepted


def _targets(topic: Any) -> Targets:
    return {
        p.partition_index: None if p.replicas is None else tuple(p.replicas)
        for p in topic.partitions
    }


def _response(ctx: RequestContext, error: ApiError | None, results: dict[str, Results]) -> Any:
    topics = tuple(
        make(
            ctx.schema.ReassignableTopicResponse,
            name=name,
            partitions=tuple(
                make(
                    ctx.schema.ReassignablePartitionResponse,
                    partition_index=index,
                    error_code=result.error,
                    error_message=result.message,
                )
                for index, result in partitions.items()
            ),
        )
        for name, partitions in results.items()
    )
    return make(
        ctx.schema.AlterPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        error_code=error.error if error else ErrorCode.none,
        error_message=error.message if error else None,
        responses=topics,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return _response(ctx, ApiError(ErrorCode.cluster_authorization_failed), {})
    if ctx.broker.metadata.controller_id() != ctx.broker.node_id:
        return _response(ctx, NOT_CONTROLLER, {})
    allow_rf = getattr(request, "allow_replication_factor_change", True)
    reassignments = {t.name: _targets(t) for t in request.topics}
    refused: dict[str, Results] = {}
    for name, targets in reassignments.items():
        topic = ctx.broker.metadata.topics.get(name)
        if topic is not None and views.is_view(topic):  # it has no replicas of its own to move
            refusal = _view_refusal(name, topic.configs[views.VIEW_SOURCE])
            refused[name] = dict.fromkeys(targets, refusal)
    moving = {name: t for name, t in reassignments.items() if name not in refused}
    results = await ctx.broker.controller.alter_partition_reassignments(moving, allow_rf)
    return _response(ctx, None, {**results, **refused})


def _view_refusal(name: str, source: str) -> ApiError:
    return ApiError(
        ErrorCode.invalid_request,
        f"{name} is a view of {source}: it has its source's replicas; reassign {source}.",
    )


API = ApiHandler(api_key=45, min_version=0, max_version=1, handle=handle, is_async=True)
