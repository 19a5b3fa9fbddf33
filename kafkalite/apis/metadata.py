"""Metadata (key 3), versions 0-13 (v13 adds a top-level error code).

Topics by name or (v12+) by id, topic ids, and auto-creation of unknown topics when both the
broker (`auto.create.topics.enable`) and the request (v4+ `allow_auto_topic_creation`) allow it.
Authorized operations, when asked for (v8+ cluster, topics), are all of them: no authorizer.
A null topic name below v12 (v10-11 carry an id field but Kafka refuses it there) is answered
INVALID_REQUEST, with the name "" those versions can carry.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.broker.replica_manager import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    Topic,
    topic_name_error,
)

ZERO_UUID = uuid.UUID(int=0)
BY_ID_FROM = 12
log = logging.getLogger(__name__)


def _partitions(ctx: RequestContext, topic: Topic) -> tuple[Any, ...]:
    return tuple(
        make(
            ctx.schema.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=p.index,
            leader_id=p.leader_id,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(p.isr),
            offline_replicas=(),
        )
        for p in topic.partitions
    )


def _topic(ctx: RequestContext, topic: Topic, operations: int) -> Any:
    return make(
        ctx.schema.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=_partitions(ctx, topic),
        topic_authorized_operations=operations,
    )


def _error_topic(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID, error: ErrorCode
) -> Any:
    return make(
        ctx.schema.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=authorized_operations.OMITTED,
    )


def _lookup(ctx: RequestContext, requested: Any, auto_create: bool, operations: int) -> Any:
    manager = ctx.broker.replica_manager
    topic_id = getattr(requested, "topic_id", None) or ZERO_UUID
    name = requested.name
    if name is None:
        if ctx.api_version < BY_ID_FROM:
            return _error_topic(ctx, "", topic_id, ErrorCode.invalid_request)
        topic = manager.topic_by_id(topic_id)
        if topic is None:
            return _error_topic(ctx, None, topic_id, ErrorCode.unknown_topic_id)
        return _topic(ctx, topic, operations)
    topic = manager.topics.get(name)
    if topic is not None:
        return _topic(ctx, topic, operations)
    if topic_name_error(name):
        return _error_topic(ctx, name, ZERO_UUID, ErrorCode.invalid_topic_exception)
    if not auto_create:
        return _error_topic(ctx, name, ZERO_UUID, ErrorCode.unknown_topic_or_partition)
    if name == OFFSETS_TOPIC:
        # Created with its fixed settings, as the group coordinator would.
        ctx.broker.groups.ensure_offsets_topic()
        created = manager.topics.get(name)
        if created is None:
            return _error_topic(ctx, name, ZERO_UUID, ErrorCode.coordinator_not_available)
        return _topic(ctx, created, operations)
    outcome, created = manager.create_topic(name)
    if created is None:
        return _error_topic(ctx, name, ZERO_UUID, outcome.error)
    log.info("auto-created topic %s: %d partition(s)", name, len(created.partitions))
    return _topic(ctx, created, operations)


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    allow = getattr(request, "allow_auto_topic_creation", True)
    auto_create = allow and broker.config.bool("auto.create.topics.enable")
    operations = authorized_operations.when(
        getattr(request, "include_topic_authorized_operations", False), authorized_operations.TOPIC
    )
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = tuple(_topic(ctx, t, operations) for t in broker.replica_manager.topics.values())
    else:
        topics = tuple(
            _lookup(ctx, requested, auto_create, operations) for requested in request.topics
        )
    listener = broker.advertised_listener
    brokers = (
        make(
            ctx.schema.MetadataResponseBroker,
            node_id=broker.node_id,
            host=listener.host,
            port=listener.port,
            rack=None,
        ),
    )
    return make(
        ctx.schema.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=authorized_operations.when(
            getattr(request, "include_cluster_authorized_operations", False),
            authorized_operations.CLUSTER,
        ),
        error_code=ErrorCode.none,
    )


API = ApiHandler(api_key=3, min_version=0, max_version=13, handle=handle)
