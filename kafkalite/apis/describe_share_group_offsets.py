"""DescribeShareGroupOffsets (key 90), versions 0-1: each share-partition's start offset,
leader epoch and lag (broker/share_group_offsets.py); a group whose topics are null (v1)
describes every share-partition it has state for."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.share_group_offsets import GroupResult, TopicResult
from kafkalite.protocol.entities import NO_THROTTLE, make


def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    groups = []
    for group in request.groups:
        if service is None:
            result = GroupResult(ErrorCode.unsupported_version)
        else:
            topics = (
                None
                if group.topics is None
                else [(t.topic_name, tuple(t.partitions)) for t in group.topics]
            )
            result = service.offsets.describe(group.group_id, topics)
        groups.append(_group(ctx, group.group_id, result))
    return make(
        ctx.schema.DescribeShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(groups),
    )


def _group(ctx: RequestContext, group_id: str, result: GroupResult) -> Any:
    return make(
        ctx.schema.DescribeShareGroupOffsetsResponseGroup,
        group_id=group_id,
        topics=tuple(_topic(ctx, topic) for topic in result.topics),
        error_code=result.error,
        error_message=result.message,
    )


def _topic(ctx: RequestContext, topic: TopicResult) -> Any:
    return make(
        ctx.schema.DescribeShareGroupOffsetsResponseTopic,
        topic_name=topic.name,
        topic_id=topic.topic_id,
        partitions=tuple(
            make(
                ctx.schema.DescribeShareGroupOffsetsResponsePartition,
                partition_index=p.partition,
                start_offset=p.start_offset,
                leader_epoch=p.leader_epoch,
                lag=p.lag,
                error_code=p.error,
                error_message=p.message,
            )
            for p in topic.partitions
        ),
    )


API = ApiHandler(api_key=90, min_version=0, max_version=1, handle=handle)
