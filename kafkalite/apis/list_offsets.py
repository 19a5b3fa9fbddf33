"""ListOffsets (key 2), versions 1-11 (v10 adds a timeout, which a local lookup needs not).

Special timestamps: -2 earliest (the log start offset; with tiered storage the remote log
start), -1 latest (high watermark, or the last stable offset for read_committed), -3 (v7+)
the record with the largest timestamp, -4 (v8+) earliest local (the local log start), -5
(v9+) latest tiered (the highest offset copied to remote storage, -1 when none is; not found
for a topic that is not tiered) and -6 (v11+, KIP-1023) earliest pending upload (the first
offset not copied to remote storage; not found for a topic that is not tiered). A special
timestamp the request's version predates, or an unknown negative one, is answered
UNSUPPORTED_VERSION (Kafka's isListOffsetsTimestampUnsupported).

A real timestamp finds the first record at or after it through the time indexes: first the
remote segments' (tiered storage, read off the loop), then the local ones. Answered by the
partition's leader through the replica manager; a new leader whose high watermark is still
below the start of its epoch answers a consumer's latest (or a lookup past what it can serve)
with OFFSET_NOT_AVAILABLE, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.partition import (
    EARLIEST,
    EARLIEST_LOCAL,
    EARLIEST_PENDING_UPLOAD,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
    NOT_FOUND,
)
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.storage.remote.s3_storage import RemoteStorageError

CONSUMER_REPLICA_ID = -1
# The first version carrying each special timestamp (Kafka's timestampMinSupportedVersion).
SPECIAL_TIMESTAMP_MIN_VERSION = {
    EARLIEST: 1,
    LATEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    return timestamp < 0 and version < SPECIAL_TIMESTAMP_MIN_VERSION.get(timestamp, 1 << 15)


async def _partition_response(
    ctx: RequestContext, topic: str, request: Any, isolation_level: int, from_client: bool
) -> Any:
    def respond(error: ErrorCode, found: tuple[int, int, int] = NOT_FOUND) -> Any:
        offset, timestamp, epoch = found
        return make(
            ctx.schema.ListOffsetsPartitionResponse,
            partition_index=request.partition_index,
            error_code=error,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=epoch,
        )

    if timestamp_unsupported(request.timestamp, ctx.api_version):
        return respond(ErrorCode.unsupported_version)
    error, found = ctx.broker.replica_manager.fetch_offset_for_timestamp(
        (topic, request.partition_index),
        request.timestamp,
        getattr(request, "current_leader_epoch", -1),
        isolation_level,
        from_client,
    )
    remote = ctx.broker.remote_log_manager
    partition = ctx.broker.replica_manager.partition(topic, request.partition_index)
    if error is ErrorCode.none and remote is not None and partition is not None:
        # A timestamp in the remote tier: its segments are searched first, off the loop.
        try:
            in_remote = await remote.find_offset_by_timestamp(partition, request.timestamp)
        except RemoteStorageError:
            return respond(ErrorCode.kafka_storage_error)
        found = in_remote or found
    return respond(error, found)


def _denied(ctx: RequestContext, topic: str, request: Any) -> Any:
    return make(
        ctx.schema.ListOffsetsPartitionResponse,
        partition_index=request.partition_index,
        error_code=ErrorCode.topic_authorization_failed,
        timestamp=NOT_FOUND[1],
        offset=NOT_FOUND[0],
        leader_epoch=NOT_FOUND[2],
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    isolation = getattr(request, "isolation_level", 0)
    from_client = request.replica_id == CONSUMER_REPLICA_ID  # not a follower or a debug tool
    topics = []
    # A topic another broker has just created may not have reached this cache yet.
    await ctx.broker.metadata.catch_up([t.name for t in request.topics])
    for topic in request.topics:
        allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        partitions = [
            await _partition_response(ctx, topic.name, p, isolation, from_client)
            if allowed
            else _denied(ctx, topic.name, p)
            for p in topic.partitions
        ]
        topics.append(
            make(ctx.schema.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions))
        )
    return make(ctx.schema.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = ApiHandler(api_key=2, min_version=1, max_version=11, handle=handle, is_async=True)
