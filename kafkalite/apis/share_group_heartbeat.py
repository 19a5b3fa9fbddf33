"""ShareGroupHeartbeat (key 76), version 1: KIP-932 share groups (the client generates its
member id; v0 was Kafka 4.0's early-access version, not served)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.consumer_group_heartbeat import heartbeat_response
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.share.share_group import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

ENTITY = "ShareGroupHeartbeatResponse"


def _denied(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """KafkaApis: READ on the group, DESCRIBE on every subscribed topic named."""
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    for name in request.subscribed_topic_names or ():
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if service is None:
        response = ShareGroupHeartbeatResponse(ErrorCode.unsupported_version)
        return heartbeat_response(ctx, response, ENTITY)
    if (denied := _denied(ctx, request)) is not None:
        return heartbeat_response(ctx, ShareGroupHeartbeatResponse(denied), ENTITY)
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
    return heartbeat_response(ctx, response, ENTITY)


API = ApiHandler(api_key=76, min_version=1, max_version=1, handle=handle, is_async=True)
