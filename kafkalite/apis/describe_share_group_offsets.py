"""DescribeShareGroupOffsets (key 90), versions 0-1: each share-partition's start offset,
leader epoch and lag (broker/share_group_offsets.py); a group whose topics are null (v1)
describes every share-partition it has state for. Kafka's ACLs: DESCRIBE on the group, then
on each topic (a named one refused is TOPIC_AUTHORIZATION_FAILED; with null topics, the
topics the principal may not describe are left out)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import share_offsets_authorization as acl
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.share_group_offsets import GroupResult, ShareGroupOffsets, TopicResult
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation

DESCRIBE = AclOperation.DESCRIBE


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    groups = []
    for group in request.groups:
        if (denied := acl.group_denied(ctx, DESCRIBE, group.group_id)) is not None:
            result = denied
        elif service is None:
            result = GroupResult(ErrorCode.unsupported_version)
        elif group.topics is None:
            result = await service.offsets.describe(group.group_id, None)
            shown = [t for t in result.topics if acl.topic_allowed(ctx, DESCRIBE, t.name)]
            result = dataclasses.replace(result, topics=tuple(shown))
        else:
            result = await _describe_named(ctx, service.offsets, group.group_id, group.topics)
        groups.append(_group(ctx, group.group_id, result))
    return make(
        ctx.schema.DescribeShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(groups),
    )


async def _describe_named(
    ctx: RequestContext, offsets: ShareGroupOffsets, group_id: str, topics: Any
) -> GroupResult:
    allowed = [t for t in topics if acl.topic_allowed(ctx, DESCRIBE, t.topic_name)]
    named = [(t.topic_name, tuple(t.partitions)) for t in allowed]
    result = await offsets.describe(group_id, named)
    if result.error is not ErrorCode.none:
        return result
    refused = [
        acl.topic_denied(t.topic_name, tuple(t.partitions)) for t in topics if t not in allowed
    ]
    return dataclasses.replace(result, topics=(*result.topics, *refused))


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


API = ApiHandler(api_key=90, min_version=0, max_version=1, handle=handle, is_async=True)
