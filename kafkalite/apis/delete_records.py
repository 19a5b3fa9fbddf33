"""DeleteRecords (key 21), versions 0-2.

Moves each partition's log start offset up to the requested offset (-1: the high watermark)
and answers the new low watermark. As in Kafka: unknown partitions answer
UNKNOWN_TOPIC_OR_PARTITION, offsets beyond the high watermark OFFSET_OUT_OF_RANGE, internal
topics INVALID_TOPIC_EXCEPTION, each with low watermark -1.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make


def _partition_result(ctx: RequestContext, topic: str, request_partition: Any) -> Any:
    error, low_watermark = ctx.broker.replica_manager.delete_records(
        (topic, request_partition.partition_index), request_partition.offset
    )
    return make(
        ctx.schema.DeleteRecordsPartitionResult,
        partition_index=request_partition.partition_index,
        low_watermark=low_watermark,
        error_code=error,
    )


def _topic_result(ctx: RequestContext, topic: Any) -> Any:
    partitions = tuple(_partition_result(ctx, topic.name, p) for p in topic.partitions)
    return make(ctx.schema.DeleteRecordsTopicResult, name=topic.name, partitions=partitions)


def handle(ctx: RequestContext, request: Any) -> Any:
    topics = tuple(_topic_result(ctx, topic) for topic in request.topics)
    return make(ctx.schema.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=21, min_version=0, max_version=2, handle=handle)
