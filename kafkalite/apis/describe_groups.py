"""DescribeGroups (key 15), versions 0-6.

v3+ may ask for authorized operations, v4+ report group.instance.id, v6 (KIP-1043) answer
GROUP_ID_NOT_FOUND with a message for a group that does not exist.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator.admin import DescribedGroup
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    requested = getattr(request, "include_authorized_operations", False)
    service = ctx.broker.groups
    served = {
        group_id: service.check_group(group_id)
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
        else ErrorCode.group_authorization_failed
        for group_id in request.groups
    }
    described, failed = await service.call_and_wait(
        lambda c, _now: [
            c.describe_group(group_id, ctx.api_version)
            if served[group_id] is ErrorCode.none
            else DescribedGroup(group_id, served[group_id], "")  # not (yet) this broker's
            for group_id in request.groups
        ],
        [g for g, error in served.items() if error is ErrorCode.none],
    )
    described = [
        DescribedGroup(d.group_id, failed[d.group_id], "") if d.group_id in failed else d
        for d in described
    ]
    groups = tuple(
        make(
            schema.DescribedGroup,
            error_code=group.error,
            error_message=group.error_message,
            group_id=group.group_id,
            group_state=group.state,
            protocol_type=group.protocol_type,
            protocol_data=group.protocol_data,
            members=tuple(
                make(
                    schema.DescribedGroupMember,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in group.members
            ),
            # Kafka sets the operations only on groups described without an error.
            authorized_operations=authorized_operations.group(
                ctx, requested and group.error is ErrorCode.none, group.group_id
            ),
        )
        for group in described
    )
    return make(schema.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups)


API = ApiHandler(api_key=15, min_version=0, max_version=6, handle=handle, is_async=True)
