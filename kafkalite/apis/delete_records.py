"""DeleteRecords (key 21), versions 0-2.

Moves each partition's log start offset up to the requested offset (-1: the high watermark)
and answers the new low watermark. As in Kafka: unknown partitions answer
UNKNOWN_TOPIC_OR_PARTITION, offsets beyond the high watermark OFFSET_OUT_OF_RANGE, internal
topics INVALID_TOPIC_EXCEPTION, each with low watermark -1. In a cluster the answer waits
(Kafka's DelayedDeleteRecords) until every follower on a live broker has moved its log start
too (they follow the leader's in their fetches and report theirs); a partition still waiting
after the request's timeout answers REQUEST_TIMED_OUT with low watermark -1.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _topic_result(ctx: RequestContext, topic: Any, delayed: Any, denied: set[str]) -> Any:
    partitions = []
    for requested in topic.partitions:
        if topic.name in denied:
            error, low_watermark = ErrorCode.topic_authorization_failed, -1
        else:
            status = delayed.statuses[(topic.name, requested.partition_index)]
            error, low_watermark = status.error, status.low_watermark
        partitions.append(
            make(
                ctx.schema.DeleteRecordsPartitionResult,
                partition_index=requested.partition_index,
                low_watermark=low_watermark,
                error_code=error,
            )
        )
    return make(ctx.schema.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions))


async def handle(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    denied = {  # KafkaApis: DELETE on each topic
        t.name
        for t in request.topics
        if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, t.name)
    }
    offsets = {
        (t.name, p.partition_index): p.offset
        for t in request.topics
        if t.name not in denied
        for p in t.partitions
    }
    delayed = replicas.delete_records_all(offsets)
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    await complete_or_expire(replicas.delete_records_purgatory, delayed, timeout_ms)
    topics = tuple(_topic_result(ctx, topic, delayed, denied) for topic in request.topics)
    return make(ctx.schema.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=21, min_version=0, max_version=2, handle=handle, is_async=True)
