"""OffsetDelete (key 47), version 0: drop a group's committed offsets (KIP-496).

Allowed for an Empty group, or for topics a live consumer group does not subscribe to.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator import TopicPartition
from kafkalite.coordinator.offset_commit import OffsetDeleteResponse
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    requested = [
        TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions
    ]
    errors = {
        tp: ErrorCode.topic_authorization_failed  # KafkaApis: READ on the topic
        for tp in requested
        if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, tp.topic)
    }
    errors.update(
        (tp, ErrorCode.unknown_topic_or_partition)
        for tp in requested
        if tp not in errors and ctx.broker.metadata.partition_state(*tp) is None
    )
    known = [tp for tp in requested if tp not in errors]
    not_served = ctx.broker.groups.check_group(request.group_id)
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        not_served = ErrorCode.group_authorization_failed
    if not_served is ErrorCode.none:
        deleted, failed = await ctx.broker.groups.call_and_wait(
            lambda c, _now: c.delete_offsets(request.group_id, known), [request.group_id]
        )
    else:
        deleted, failed = OffsetDeleteResponse(not_served), {}
    # A tombstone that could not be written fails the request, as in Kafka.
    not_persisted = failed.get(request.group_id)
    error = deleted.error if deleted.error is not ErrorCode.none else not_persisted
    if error is not None and error is not ErrorCode.none:
        return make(
            schema.OffsetDeleteResponse,
            error_code=error,
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    errors.update((TopicPartition(r.topic, r.partition), r.error) for r in deleted.partitions)
    topics = tuple(
        make(
            schema.OffsetDeleteResponseTopic,
            name=t.name,
            partitions=tuple(
                make(
                    schema.OffsetDeleteResponsePartition,
                    partition_index=p.partition_index,
                    error_code=errors.get(
                        TopicPartition(t.name, p.partition_index), ErrorCode.none
                    ),
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return make(
        schema.OffsetDeleteResponse,
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=topics,
    )


API = ApiHandler(api_key=47, min_version=0, max_version=0, handle=handle, is_async=True)
