"""ListGroups (key 16), versions 0-5 (v4+ filter by state, KIP-518; v5+ by type, KIP-848):
classic, consumer and share groups (KIP-932)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator.admin import ListedGroup
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.share.share_group import SHARE_GROUP_TYPE, SHARE_PROTOCOL_TYPE


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    states = getattr(request, "states_filter", ())
    types = getattr(request, "types_filter", ())
    listed, failed = await ctx.broker.groups.call_and_wait(
        lambda c, _now: c.list_groups(states, types)
    )
    listed += _share_groups(ctx, states, types)
    if not ctx.authorized_cluster(AclOperation.DESCRIBE, log_denied=False):
        listed = [  # Kafka lists only the groups the principal may DESCRIBE
            group
            for group in listed
            if ctx.authorized(
                AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id, log_denied=False
            )
        ]
    groups = tuple(
        make(
            schema.ListedGroup,
            group_id=group.group_id,
            protocol_type=group.protocol_type,
            group_state=group.state,
            group_type=group.group_type,
        )
        for group in listed
    )
    return make(
        schema.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=failed.get("", ErrorCode.none),  # a partition's writes did not commit
        groups=groups,
    )


def _share_groups(ctx: RequestContext, states: Any, types: Any) -> list[ListedGroup]:
    """Share groups (KIP-932), under the same filters (case-insensitive; empty: all)."""
    wanted_types = {kind.lower() for kind in types}
    wanted_states = {state.lower() for state in states}
    if ctx.broker.share_groups is None or (wanted_types and SHARE_GROUP_TYPE not in wanted_types):
        return []
    return [
        ListedGroup(group_id, SHARE_PROTOCOL_TYPE, state, SHARE_GROUP_TYPE)
        for group_id, state in ctx.broker.share_groups.listed()
        if not wanted_states or state.lower() in wanted_states
    ]


API = ApiHandler(api_key=16, min_version=0, max_version=5, handle=handle, is_async=True)
