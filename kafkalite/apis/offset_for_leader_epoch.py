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


def handle(ctx: RequestContext, request: Any) -> Any:
    # KafkaApis (KIP-320): CLUSTER_ACTION (brokers) allows every topic, whoever asks;
    # otherwise DESCRIBE on each topic (consumers checking for truncation).
    cluster_action = ctx.authorized_cluster(AclOperation.CLUSTER_ACTION, log_denied=False)
    topics = tuple(
        make(
            ctx.schema.OffsetForLeaderTopicResult,
            topic=topic.topic,
            partitions=tuple(
                _partition_result(ctx, topic.topic, p)
                if cluster_action
                or ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
                else _denied(ctx, topic.topic, p)
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(ctx.schema.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=23, min_version=2, max_version=4, handle=handle)
