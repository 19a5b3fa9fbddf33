"""AlterShareGroupOffsets (key 91), version 0: new start offsets for the share-partitions of
an empty share group (broker/share_group_offsets.py). Kafka's ACLs: READ on the group, then
on each topic (a refused topic is TOPIC_AUTHORIZATION_FAILED and left as it is)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import share_offsets_authorization as acl
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.share_group_offsets import GroupResult, TopicResult
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation

READ = AclOperation.READ


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if (denied := acl.group_denied(ctx, READ, request.group_id)) is not None:
        result = denied
    elif service is None:
        result = GroupResult(ErrorCode.unsupported_version)
    else:
        allowed = [t for t in request.topics if acl.topic_allowed(ctx, READ, t.topic_name)]
        topics = [
            (t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
            for t in allowed
        ]
        result = await service.offsets.alter(request.group_id, topics)
        refused = [
            acl.topic_denied(t.topic_name, tuple(p.partition_index for p in t.partitions))
            for t in request.topics
            if t not in allowed
        ]
        if result.error is ErrorCode.none:
            result = dataclasses.replace(result, topics=(*result.topics, *refused))
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
