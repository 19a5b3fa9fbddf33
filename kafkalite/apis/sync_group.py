"""SyncGroup (key 14), versions 0-5.

The leader sends everyone's assignment; every member's request is parked until then.
v3+ carry group.instance.id, v5+ echo the protocol type and name: they are mandatory there,
and a v5 request without them gets INCONSISTENT_GROUP_PROTOCOL (as KafkaApis does).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator import SyncGroupRequest
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

PROTOCOL_MANDATORY_FROM = 5


def _refused(ctx: RequestContext, error: ErrorCode) -> Any:
    return make(
        ctx.schema.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        protocol_type=None,
        protocol_name=None,
        assignment=b"",
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _refused(ctx, ErrorCode.group_authorization_failed)
    if ctx.api_version >= PROTOCOL_MANDATORY_FROM and (
        request.protocol_type is None or request.protocol_name is None
    ):
        return _refused(ctx, ErrorCode.inconsistent_group_protocol)
    synced = await ctx.broker.groups.sync_group(
        SyncGroupRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments={a.member_id: a.assignment for a in request.assignments},
        )
    )
    return make(
        ctx.schema.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=synced.error,
        protocol_type=synced.protocol_type,
        protocol_name=synced.protocol_name,
        assignment=synced.assignment,
    )


API = ApiHandler(api_key=14, min_version=0, max_version=5, handle=handle, is_async=True)
