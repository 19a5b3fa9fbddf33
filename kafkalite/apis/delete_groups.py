"""DeleteGroups (key 42), versions 0-2: remove Empty groups with their committed offsets
(a share group with its share-partitions' state in `__share_group_state`, also after a
restart, when only that state is left of it).

Like Kafka, the group id "" is looked up as any other (only a null id is INVALID_GROUP_ID).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.share_acks import is_share_group
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    names = list(request.groups_names)
    service = ctx.broker.groups
    denied = ErrorCode.group_authorization_failed
    not_served = {
        n: e
        for n in names
        if (
            e := service.check_group(n)
            if ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, n)
            else denied
        )
        is not ErrorCode.none
    }
    shares = {n for n in names if n not in not_served and await _share_group(ctx, n)}
    served = [name for name in names if name not in not_served and name not in shares]
    results, failed = await service.call_and_wait(
        lambda c, now: c.delete_groups(served, now), served
    )
    for name in shares:
        assert ctx.broker.share_groups is not None
        results[name] = await ctx.broker.share_groups.delete_group(name)
    failed = {**failed, **not_served}
    return make(
        schema.DeleteGroupsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(
                schema.DeletableGroupResult,
                group_id=name,
                error_code=failed[name] if name in failed else results[name],
            )
            for name in names
        ),
    )


async def _share_group(ctx: RequestContext, group_id: str) -> bool:
    """A share group, also one whose members are gone with a restart (or a move of its
    coordinator) but whose share-partitions have state (membership is not persisted yet)."""
    service = ctx.broker.share_groups
    if service is None or is_share_group(ctx, group_id):
        return service is not None
    if ctx.broker.groups.coordinator.has_group(group_id):
        return False  # a consumer group
    return await service.offsets.share_group(group_id, create=False) is not None


API = ApiHandler(api_key=42, min_version=0, max_version=2, handle=handle, is_async=True)
