"""DescribeProducers (key 61), version 0.

The active producers of each partition this broker leads (kafka-transactions.sh
describe-producers), from the partition's producer state: id, epoch, last sequence and
timestamp, coordinator epoch and the first offset of its open transaction (-1 if none).
Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION; followers NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _partition(ctx: RequestContext, topic: str, index: int) -> Any:
    partition = ctx.broker.replica_manager.partition(topic, index)
    error = ErrorCode.unknown_topic_or_partition if partition is None else ErrorCode.none
    if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic):
        error, partition = ErrorCode.topic_authorization_failed, None
    if partition is not None and not partition.is_leader:
        error = ErrorCode.not_leader_or_follower
    entries = []
    if partition is not None and error is ErrorCode.none:
        entries = list(partition.log.producer_state.producers.values())
    return make(
        ctx.schema.PartitionResponse,
        partition_index=index,
        error_code=error,
        error_message=None,
        active_producers=tuple(
            make(
                ctx.schema.ProducerState,
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=entry.current_txn_first_offset,
            )
            for entry in entries
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    topics = tuple(
        make(
            ctx.schema.TopicResponse,
            name=topic.name,
            partitions=tuple(_partition(ctx, topic.name, i) for i in topic.partition_indexes),
        )
        for topic in request.topics
    )
    return make(ctx.schema.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=61, min_version=0, max_version=0, handle=handle)
