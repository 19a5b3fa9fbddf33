"""LeaveGroup (key 13), versions 0-5.

v0-2 remove one member by id; v3+ a batch of members, static ones by group.instance.id
(KIP-345), with a per-member error; v5 adds a reason. A group that does not exist gives
v3+ every member UNKNOWN_MEMBER_ID and no top-level error (Kafka 4's
GroupCoordinatorService.leaveGroup, as the coordinator answers), v0-2 a top-level
UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version < 3:
        members: tuple[MemberIdentity, ...] = (MemberIdentity(request.member_id),)
    else:
        members = tuple(
            MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None))
            for m in request.members
        )
    leave = LeaveGroupRequest(request.group_id, members)
    not_served = ctx.broker.groups.check_group(request.group_id)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        not_served = ErrorCode.group_authorization_failed
    if not_served is ErrorCode.none:
        left, failed = await ctx.broker.groups.call_and_wait(
            lambda c, now: c.leave_group(leave, now), [request.group_id]
        )
        if request.group_id in failed:
            left = LeaveGroupResponse(failed[request.group_id])
    else:
        left = LeaveGroupResponse(not_served)
    schema = ctx.schema
    error = left.error
    if ctx.api_version < 3 and left.members:
        # One member, one error: v0-2 have no per-member list (a top-level error comes
        # without members).
        error = left.members[0].error
    return make(
        schema.LeaveGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        members=tuple(
            make(
                schema.MemberResponse,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=m.error,
            )
            for m in left.members
        )
        if ctx.api_version >= 3
        else (),
    )


API = ApiHandler(api_key=13, min_version=0, max_version=5, handle=handle, is_async=True)
