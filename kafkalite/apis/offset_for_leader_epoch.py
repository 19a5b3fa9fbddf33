"""OffsetForLeaderEpoch (key 23), versions 2-4 (as Kafka 4.4 advertises; librdkafka sends v2).

Answers the end offset of the requested
epoch from the leader epoch cache, which consumers use to detect log truncation.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _partition_result(ctx: RequestContext, topic: str, request: Any) -> Any:
    def respond(error: ErrorCode, epoch: int = -1, end_offset: int = -1) -> Any:
        return make(
            ctx.schema.EpochEndOffset,
            error_code=error,
            partition=request.partition,
            leader_epoch=epoch,
            end_offset=end_offset,
        )

    error, epoch, end_offset = ctx.broker.replica_manager.last_offset_for_leader_epoch(
        (topic, request.partition),
        getattr(request, "current_leader_epoch", -1),
        request.leader_epoch,
    )
    return respond(error, epoch, end_offset)


def _denied(ctx: RequestContext, topic: str, request: Any) -> Any:
    return make(
        ctx.schema.EpochEndOffset,
        error_code=ErrorCode.topic_authorization_failed,
        partition=request.partition,
        leader_epoch=-1,
        end_offset=-1,
    )


def _allowed(ctx: RequestContext, request: Any, topic: str, cluster_action: bool) -> bool:
    """KafkaApis: followers need CLUSTER_ACTION, consumers DESCRIBE on the topic."""
    if getattr(request, "replica_id", -1) >= 0:
        return cluster_action
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def handle(ctx: RequestContext, request: Any) -> Any:
    from_follower = getattr(request, "replica_id", -1) >= 0
    cluster_action = from_follower and ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    topics = tuple(
        make(
            ctx.schema.OffsetForLeaderTopicResult,
            topic=topic.topic,
            partitions=tuple(
                _partition_result(ctx, topic.topic, p)
                if _allowed(ctx, request, topic.topic, cluster_action)
                else _denied(ctx, topic.topic, p)
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(ctx.schema.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=23, min_version=2, max_version=4, handle=handle)
