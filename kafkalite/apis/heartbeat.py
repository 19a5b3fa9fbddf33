"""Heartbeat (key 12), versions 0-4 (v3+ carry group.instance.id).

REBALANCE_IN_PROGRESS tells a live member to rejoin.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator import HeartbeatRequest
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    heartbeat = HeartbeatRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    error = ctx.broker.groups.check_group(request.group_id)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif error is ErrorCode.none:
        error, failed = await ctx.broker.groups.call_and_wait(
            lambda c, now: c.heartbeat(heartbeat, now), [request.group_id]
        )
        error = failed.get(request.group_id, error)
    return make(ctx.schema.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)


API = ApiHandler(api_key=12, min_version=0, max_version=4, handle=handle, is_async=True)
