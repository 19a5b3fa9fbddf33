"""ShareGroupHeartbeat (key 76), version 1: KIP-932 share groups (the client generates its
member id; v0 was Kafka 4.0's early-access version, not served)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.consumer_group_heartbeat import _topic_partitions
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.share.share_group import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if service is None:
        return _response(ctx, ShareGroupHeartbeatResponse(ErrorCode.unsupported_version))
    names = request.subscribed_topic_names
    response = await service.heartbeat(
        ShareGroupHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=None if names is None else tuple(names),
            client_id=ctx.client_id or "",
            client_host=ctx.client_host,
        )
    )
    return _response(ctx, response)


def _response(ctx: RequestContext, response: ShareGroupHeartbeatResponse) -> Any:
    schema = ctx.schema
    assignment = None
    if response.assignment is not None:
        assignment = make(
            schema.Assignment, topic_partitions=_topic_partitions(schema, response.assignment)
        )
    return make(
        schema.ShareGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=response.error,
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=response.heartbeat_interval_ms),
        assignment=assignment,
    )


API = ApiHandler(api_key=76, min_version=1, max_version=1, handle=handle, is_async=True)
