"""DescribeTopicPartitions (key 75), version 0 (KIP-966; the Java Admin's describeTopics).

As Kafka's DescribeTopicPartitionsRequestHandler: the requested topics (all when none are named)
from the cursor's topic on, sorted by name, at most `response_partition_limit` partitions (at
least one; capped at Kafka's max.request.partition.size.limit default, 2000); the partition
after the last one served becomes `next_cursor`. Named topics that do not exist are answered
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for illegal names) and use no budget. Every
topic answered carries all topic operations (no authorizer), as Kafka's does. A cursor whose
topic is not among the named ones is an INVALID_REQUEST for every named topic. Topics and
partition states come from the cluster metadata (any broker answers for every partition): the
replicas, ISR, leader (-1 while not live) and offline replicas (not live brokers); no ELR.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker import views
from kafkalite.broker.admin_manager import topic_name_error
from kafkalite.broker.partition import PartitionState
from kafkalite.broker.replica_manager import INTERNAL_TOPICS
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

MAX_PARTITIONS_PER_RESPONSE = 2000  # Kafka's max.request.partition.size.limit default


def _partitions(
    ctx: RequestContext, states: list[PartitionState], first: int, budget: int
) -> tuple[Any, ...]:
    live = {b.broker_id for b in ctx.broker.metadata.brokers()}
    return tuple(
        make(
            ctx.schema.DescribeTopicPartitionsResponsePartition,
            error_code=ErrorCode.none,
            partition_index=state.partition,
            leader_id=state.leader if state.leader in live else -1,
            leader_epoch=state.leader_epoch,
            replica_nodes=tuple(state.replicas),
            isr_nodes=tuple(state.isr),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=tuple(r for r in state.replicas if r not in live),
        )
        for state in states[first : first + budget]
    )


def _topic(ctx: RequestContext, name: str, error: ErrorCode, **found: Any) -> Any:
    values = {
        "topic_id": None,  # kio writes the zero UUID
        "partitions": (),
        **found,
    }
    return make(
        ctx.schema.DescribeTopicPartitionsResponseTopic,
        error_code=error,
        name=name,
        is_internal=name in INTERNAL_TOPICS,
        topic_authorized_operations=authorized_operations.allowed(
            ctx, authorized_operations.TOPIC, ResourceType.TOPIC, name
        ),
        **values,
    )


def _missing(ctx: RequestContext, name: str) -> Any:
    error = ErrorCode.invalid_topic_exception if topic_name_error(name) else None
    return _topic(ctx, name, error or ErrorCode.unknown_topic_or_partition)


def _invalid_request(ctx: RequestContext, names: list[str]) -> Any:
    topics = tuple(
        make(
            ctx.schema.DescribeTopicPartitionsResponseTopic,
            error_code=ErrorCode.invalid_request,
            name=name,
            topic_id=None,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=authorized_operations.OMITTED,
        )
        for name in names
    )
    return make(
        ctx.schema.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE, topics=topics
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    metadata = ctx.broker.metadata
    known = metadata.topics
    named = [t.name for t in request.topics]
    cursor = request.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    candidates = sorted({name for name in (named or known) if name >= start_name})
    if not named:  # every topic: those the principal may not DESCRIBE are left out
        candidates = [
            n
            for n in candidates
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n, log_denied=False)
        ]
    if named and cursor is not None and cursor.topic_name not in candidates:
        return _invalid_request(ctx, named)
    budget = min(MAX_PARTITIONS_PER_RESPONSE, max(1, request.response_partition_limit))
    first = cursor.partition_index if cursor is not None else 0
    topics: list[Any] = []
    next_cursor = None
    for name in candidates:
        if budget <= 0:  # the next response starts here, whether the topic exists or not
            next_cursor = make(ctx.schema.Cursor, topic_name=name, partition_index=0)
            break
        topic = known.get(name)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append(_topic(ctx, name, ErrorCode.topic_authorization_failed))
            continue
        if topic is None:
            topics.append(_missing(ctx, name))
            continue
        start = first if name == start_name else 0
        states = views.partition_states(metadata, topic)
        partitions = _partitions(ctx, states, start, budget)
        topics.append(
            _topic(
                ctx,
                name,
                ErrorCode.none,
                topic_id=topic.topic_id,
                partitions=partitions,
            )
        )
        budget -= len(partitions)
        if start + len(partitions) < len(states):
            next_cursor = make(
                ctx.schema.Cursor, topic_name=name, partition_index=start + len(partitions)
            )
            break
    return make(
        ctx.schema.DescribeTopicPartitionsResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        next_cursor=next_cursor,
    )


API = ApiHandler(api_key=75, min_version=0, max_version=0, handle=handle)
