"""ListGroups (key 16), versions 0-5 (v4+ filter by state, KIP-518; v5+ by type, KIP-848)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    states = getattr(request, "states_filter", ())
    types = getattr(request, "types_filter", ())
    listed, failed = await ctx.broker.groups.call_and_wait(
        lambda c, _now: c.list_groups(states, types)
    )
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


API = ApiHandler(api_key=16, min_version=0, max_version=5, handle=handle, is_async=True)
