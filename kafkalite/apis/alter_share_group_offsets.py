"""AlterShareGroupOffsets (key 91), version 0: new start offsets for the share-partitions of
an empty share group (broker/share_group_offsets.py)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.share_group_offsets import GroupResult, TopicResult
from kafkalite.protocol.entities import NO_THROTTLE, make


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if service is None:
        result = GroupResult(ErrorCode.unsupported_version)
    else:
        topics = [
            (t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
            for t in request.topics
        ]
        result = await service.offsets.alter(request.group_id, topics)
    return make(
        ctx.schema.AlterShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        responses=tuple(_topic(ctx, topic) for topic in result.topics),
    )


def _topic(ctx: RequestContext, topic: TopicResult) -> Any:
    return make(
        ctx.schema.AlterShareGroupOffsetsResponseTopic,
        topic_name=topic.name,
        topic_id=topic.topic_id,
        partitions=tuple(
            make(
                ctx.schema.AlterShareGroupOffsetsResponsePartition,
                partition_index=p.partition,
                error_code=p.error,
                error_message=p.message,
            )
            for p in topic.partitions
        ),
    )


API = ApiHandler(api_key=91, min_version=0, max_version=0, handle=handle, is_async=True)
