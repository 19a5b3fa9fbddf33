"""OffsetFetch (key 9), versions 1-9 (v0 was removed in Kafka 4, KIP-896).

v2+ may ask for every committed partition (topics null) and have a top-level error;
v5+ return the leader epoch; v8+ batch several groups in one request. The group id "" is
served like any other, as Kafka does for backwards compatibility.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.coordinator import FetchedOffset, OffsetFetchResponse, TopicPartition

BATCHED_FROM = 8


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if ctx.api_version < BATCHED_FROM:
        fetched = _fetch(ctx, request.group_id, request.topics)
        return make(
            schema.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=_topics(
                ctx, schema.OffsetFetchResponseTopic, schema.OffsetFetchResponsePartition, fetched
            ),
            error_code=fetched.error,
        )
    groups = tuple(
        make(
            schema.OffsetFetchResponseGroup,
            group_id=group.group_id,
            topics=_topics(
                ctx, schema.OffsetFetchResponseTopics, schema.OffsetFetchResponsePartitions, fetched
            ),
            error_code=fetched.error,
        )
        for group in request.groups
        for fetched in (_fetch(ctx, group.group_id, group.topics),)
    )
    return make(schema.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=groups)


def _fetch(ctx: RequestContext, group_id: str, topics: Any) -> OffsetFetchResponse:
    wanted = (
        None
        if topics is None
        else [TopicPartition(t.name, index) for t in topics for index in t.partition_indexes]
    )
    return ctx.broker.groups.coordinator.fetch_offsets(group_id, wanted)


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


API = ApiHandler(api_key=9, min_version=1, max_version=9, handle=handle)
