"""ListPartitionReassignments (key 46), version 0 (`kafka-reassign-partitions --verify/--list`).

Answered by the controller (broker/controller_api.py; another broker: NOT_CONTROLLER, as in
Kafka's ZooKeeper era): every partition being moved (or those asked for), with its full
replica set and the replicas being added and removed. Partitions not moving, and unknown ones,
are left out, as Kafka does. A single node never moves a partition: its answer is empty.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.controller_api import NOT_CONTROLLER, ApiError
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation


def _wanted(request: Any) -> dict[str, set[int]] | None:
    if request.topics is None:
        return None
    return {t.name: set(t.partition_indexes) for t in request.topics}


def _response(ctx: RequestContext, error: Any, topics: tuple) -> Any:
    return make(
        ctx.schema.ListPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        error_code=error.error if error else ErrorCode.none,
        error_message=error.message if error else None,
        topics=topics,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        return _response(ctx, ApiError(ErrorCode.cluster_authorization_failed), ())
    if ctx.broker.metadata.controller_id() != ctx.broker.node_id:
        return _response(ctx, NOT_CONTROLLER, ())
    wanted = _wanted(request)
    ongoing = await ctx.broker.controller.list_partition_reassignments()
    topics = []
    for name, partitions in sorted(ongoing.items()):
        shown = [
            make(
                ctx.schema.OngoingPartitionReassignment,
                partition_index=index,
                replicas=assignment.replicas,
                adding_replicas=assignment.adding_replicas,
                removing_replicas=assignment.removing_replicas,
            )
            for index, assignment in sorted(partitions.items())
            if wanted is None or index in wanted.get(name, ())
        ]
        if shown:
            topics.append(
                make(ctx.schema.OngoingTopicReassignment, name=name, partitions=tuple(shown))
            )
    return _response(ctx, None, tuple(topics))


API = ApiHandler(api_key=46, min_version=0, max_version=0, handle=handle, is_async=True)
