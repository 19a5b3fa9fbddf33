"""OffsetFetch (key 9), versions 1-10 (v0 was removed in Kafka 4, KIP-896).

v2+ may ask for every committed partition (topics null) and have a top-level error;
v5+ return the leader epoch; v8+ batch several groups in one request; v10 names topics by
id (an unknown id: UNKNOWN_TOPIC_ID). The group id "" is
served like any other, as Kafka does for backwards compatibility. v7+ `require_stable`
(KIP-447): a partition with an offset pending in an open transaction answers
UNSTABLE_OFFSET_COMMIT (the client retries until the transaction ends).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.topic_ids import ZERO_UUID, topic_id, topic_name
from kafkalite.coordinator import FetchedOffset, OffsetFetchResponse, TopicPartition
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

BATCHED_FROM = 8


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if ctx.api_version < BATCHED_FROM:
        fetched = _stable(
            ctx, request, request.group_id, await _fetch(ctx, request.group_id, request.topics)
        )
        return make(
            schema.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=_topics(
                ctx, schema.OffsetFetchResponseTopic, schema.OffsetFetchResponsePartition, fetched
            ),
            error_code=fetched.error,
        )
    groups = []
    for group in request.groups:
        fetched = await _fetch(ctx, group.group_id, group.topics)
        fetched = _stable(ctx, request, group.group_id, fetched)
        groups.append(
            make(
                schema.OffsetFetchResponseGroup,
                group_id=group.group_id,
                topics=_topics(
                    ctx,
                    schema.OffsetFetchResponseTopics,
                    schema.OffsetFetchResponsePartitions,
                    fetched,
                ),
                error_code=fetched.error,
            )
        )
    return make(schema.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))


def _stable(
    ctx: RequestContext, request: Any, group_id: str, fetched: OffsetFetchResponse
) -> OffsetFetchResponse:
    if not getattr(request, "require_stable", False):
        return fetched
    coordinator = ctx.broker.groups.coordinator
    return replace(
        fetched,
        partitions=tuple(
            FetchedOffset(o.topic, o.partition, error=ErrorCode.unstable_offset_commit)
            if o.error is ErrorCode.none
            and coordinator.has_pending_txn_offset(group_id, TopicPartition(o.topic, o.partition))
            else o
            for o in fetched.partitions
        ),
    )


async def _fetch(ctx: RequestContext, group_id: str, topics: Any) -> OffsetFetchResponse:
    """The group's committed offsets, answered once the writes before are committed."""
    groups = ctx.broker.groups
    error = groups.check_group(group_id)
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error = ErrorCode.group_authorization_failed  # KafkaApis: DESCRIBE on the group
    if error is not ErrorCode.none:
        return _not_served(ctx, topics, error)
    if topics is None:
        fetched, failed = await groups.call_and_wait(
            lambda c, _now: c.fetch_offsets(group_id, None), [group_id]
        )
        if failed:
            return _not_served(ctx, topics, failed[group_id])
        return replace(fetched, partitions=_describable(ctx, fetched.partitions))
    wanted, unknown = [], []
    for entry in topics:
        name = topic_name(ctx, entry)
        for index in entry.partition_indexes:
            if name is None:  # kio reads the zero id as None
                topic = str(entry.topic_id or ZERO_UUID)
                unknown.append(FetchedOffset(topic, index, error=ErrorCode.unknown_topic_id))
            elif not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                denied = ErrorCode.topic_authorization_failed
                unknown.append(FetchedOffset(name, index, error=denied))
            else:
                wanted.append(TopicPartition(name, index))
    fetched, failed = await groups.call_and_wait(
        lambda c, _now: c.fetch_offsets(group_id, wanted), [group_id]
    )
    if failed:
        return _not_served(ctx, topics, failed[group_id])
    return replace(fetched, partitions=fetched.partitions + tuple(unknown))


def _describable(
    ctx: RequestContext, offsets: tuple[FetchedOffset, ...]
) -> tuple[FetchedOffset, ...]:
    """All of a group's offsets: those of topics the principal may DESCRIBE (Kafka)."""
    return tuple(
        o
        for o in offsets
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, o.topic, log_denied=False)
    )


def _not_served(ctx: RequestContext, topics: Any, error: ErrorCode) -> OffsetFetchResponse:
    """A group this broker does not serve (now): a top-level error from v2, each partition's
    before (v1 has no top-level error)."""
    if ctx.api_version >= 2 or topics is None:
        return OffsetFetchResponse(error)
    return OffsetFetchResponse(
        error,
        tuple(
            FetchedOffset(entry.name, index, error=error)
            for entry in topics
            for index in entry.partition_indexes
        ),
    )


def _topics(
    ctx: RequestContext, topic_cls: type, partition_cls: type, fetched: OffsetFetchResponse
) -> tuple[Any, ...]:
    by_topic: dict[str, list[FetchedOffset]] = defaultdict(list)
    for offset in fetched.partitions:
        by_topic[offset.topic].append(offset)
    return tuple(
        make(
            topic_cls,
            name=topic,
            topic_id=_id_of(ctx, topic, offsets),
            partitions=tuple(
                make(
                    partition_cls,
                    partition_index=o.partition,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    error_code=o.error,
                )
                for o in offsets
            ),
        )
        for topic, offsets in by_topic.items()
    )


def _id_of(ctx: RequestContext, topic: str, offsets: list[FetchedOffset]) -> uuid.UUID:
    if offsets[0].error is ErrorCode.unknown_topic_id:
        return uuid.UUID(topic)  # echo the id nobody has
    return topic_id(ctx, topic)


API = ApiHandler(api_key=9, min_version=1, max_version=10, handle=handle, is_async=True)
