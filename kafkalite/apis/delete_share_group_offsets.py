"""DeleteShareGroupOffsets (key 92), version 0: forget the state of the named topics'
share-partitions of an empty share group (broker/share_group_offsets.py). Kafka's ACLs:
DELETE on the group, then READ on each topic (a refused topic is TOPIC_AUTHORIZATION_FAILED
and its state kept)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import share_offsets_authorization as acl
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.share_group_offsets import GroupResult
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if (denied := acl.group_denied(ctx, AclOperation.DELETE, request.group_id)) is not None:
        result = denied
    elif service is None:
        result = GroupResult(ErrorCode.unsupported_version)
    else:
        names = [t.topic_name for t in request.topics]
        allowed = [name for name in names if acl.topic_allowed(ctx, AclOperation.READ, name)]
        result = await service.offsets.delete(request.group_id, allowed)
        refused = [acl.topic_denied(name) for name in names if name not in allowed]
        if result.error is ErrorCode.none:
            result = dataclasses.replace(result, topics=(*result.topics, *refused))
    return make(
        ctx.schema.DeleteShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        responses=tuple(
            make(
                ctx.schema.DeleteShareGroupOffsetsResponseTopic,
                topic_name=t.name,
                topic_id=t.topic_id,
                error_code=t.error,
                error_message=t.message,
            )
            for t in result.topics
        ),
    )


API = ApiHandler(api_key=92, min_version=0, max_version=0, handle=handle, is_async=True)
