"""DeleteShareGroupOffsets (key 92), version 0: forget the state of the named topics'
share-partitions of an empty share group (broker/share_group_offsets.py)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.share_group_offsets import GroupResult
from kafkalite.protocol.entities import NO_THROTTLE, make


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if service is None:
        result = GroupResult(ErrorCode.unsupported_version)
    else:
        names = [t.topic_name for t in request.topics]
        result = await service.offsets.delete(request.group_id, names)
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
