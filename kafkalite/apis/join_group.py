"""JoinGroup (key 11), versions 0-9.

v4+ (KIP-394): a new dynamic member first gets MEMBER_ID_REQUIRED with its id and rejoins
with it. v5+ carry group.instance.id (KIP-345), v8+ a reason, v9 skip_assignment (KIP-814).
The request is parked until the rebalance's join phase ends.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.share_acks import is_share_group
from kafkalite.coordinator import JoinGroupRequest, JoinGroupResponse, Protocol
from kafkalite.protocol.entities import NO_THROTTLE, make, millis
from kafkalite.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        denied = JoinGroupResponse(ErrorCode.group_authorization_failed, request.member_id)
        return _response(ctx, denied)
    if is_share_group(ctx, request.group_id):
        # Kafka's classicGroupJoinToClassicGroup: the group is not a classic group.
        refused = JoinGroupResponse(ErrorCode.unknown_member_id, request.member_id)
        return _response(ctx, refused)
    session_timeout_ms = millis(request.session_timeout)
    rebalance_timeout = getattr(request, "rebalance_timeout", None)
    joined = await ctx.broker.groups.join_group(
        JoinGroupRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            protocol_type=request.protocol_type,
            protocols=tuple(Protocol(p.name, p.metadata) for p in request.protocols),
            session_timeout_ms=session_timeout_ms,
            # v0 has no rebalance timeout: Kafka uses the session timeout.
            rebalance_timeout_ms=(
                session_timeout_ms if rebalance_timeout is None else millis(rebalance_timeout)
            ),
            api_version=ctx.api_version,
            client_id=ctx.client_id or "",
            client_host=ctx.client_host,
            group_instance_id=getattr(request, "group_instance_id", None),
            reason=getattr(request, "reason", None),
        )
    )
    return _response(ctx, joined)


def _response(ctx: RequestContext, joined: JoinGroupResponse) -> Any:
    schema = ctx.schema
    members = tuple(
        make(
            schema.JoinGroupResponseMember,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=m.metadata,
        )
        for m in joined.members
    )
    return make(
        schema.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=joined.error,
        generation_id=joined.generation_id,
        protocol_type=joined.protocol_type,
        # Not nullable before v7.
        protocol_name=joined.protocol_name if ctx.api_version >= 7 else joined.protocol_name or "",
        leader=joined.leader,
        skip_assignment=joined.skip_assignment,
        member_id=joined.member_id,
        members=members,
    )


API = ApiHandler(api_key=11, min_version=0, max_version=9, handle=handle, is_async=True)
