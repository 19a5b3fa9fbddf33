"""ConsumerGroupHeartbeat (key 68), versions 0-1: KIP-848 consumer groups.

v0 lets the coordinator generate the member id; v1 (KIP-1082) has the client generate it
and may subscribe by regular expression (matched with Python's `re` against whole topic
names, where Kafka uses RE2/J: the common syntax is the same; "" clears the regex).
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.share_acks import is_share_group
from kafkalite.coordinator.consumer_group import Partitions
from kafkalite.coordinator.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _denied(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """KafkaApis: READ on the group, and DESCRIBE on every subscribed topic named."""
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    for name in request.subscribed_topic_names or ():
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    if (denied := _denied(ctx, request)) is not None:
        return heartbeat_response(ctx, ConsumerGroupHeartbeatResponse(denied))
    if is_share_group(ctx, request.group_id):
        message = f"Group {request.group_id} is not a consumer group."
        return heartbeat_response(
            ctx, ConsumerGroupHeartbeatResponse(ErrorCode.group_id_not_found, message)
        )
    response = await ctx.broker.groups.consumer_group_heartbeat(_request(ctx, request))
    return heartbeat_response(ctx, response)


def _request(ctx: RequestContext, request: Any) -> ConsumerGroupHeartbeatRequest:
    owned = request.topic_partitions
    names = request.subscribed_topic_names
    return ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        api_version=ctx.api_version,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout // datetime.timedelta(milliseconds=1),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=None
        if owned is None
        else frozenset((t.topic_id, p) for t in owned for p in t.partitions),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
    )


def heartbeat_response(
    ctx: RequestContext,
    response: ConsumerGroupHeartbeatResponse,
    entity: str = "ConsumerGroupHeartbeatResponse",
) -> Any:
    """The KIP-848 heartbeat's answer; share groups' (KIP-932) has the same fields."""
    schema = ctx.schema
    assignment = None
    if response.assignment is not None:
        assignment = make(
            schema.Assignment, topic_partitions=_topic_partitions(schema, response.assignment)
        )
    return make(
        getattr(schema, entity),
        throttle_time=NO_THROTTLE,
        error_code=response.error,
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=response.heartbeat_interval_ms),
        assignment=assignment,
    )


def _topic_partitions(schema: Any, partitions: Partitions) -> tuple[Any, ...]:
    by_topic: dict = defaultdict(list)
    for topic_id, partition in sorted(partitions):
        by_topic[topic_id].append(partition)
    return tuple(
        make(schema.TopicPartitions, topic_id=topic_id, partitions=tuple(indexes))
        for topic_id, indexes in by_topic.items()
    )


API = ApiHandler(api_key=68, min_version=0, max_version=1, handle=handle, is_async=True)
