"""Metadata (key 3), versions 0-13 (v13 adds a top-level error code).

Topics by name or (v12+) by id, topic ids, and auto-creation of unknown topics when both the
broker (`auto.create.topics.enable`) and the request (v4+ `allow_auto_topic_creation`) allow it.
Authorized operations, when asked for (v8+ cluster, topics), are those the ACLs allow (all
of them without an authorizer); topics the principal may not DESCRIBE are left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named.
A null topic name below v12 (v10-11 carry an id field but Kafka refuses it there) is answered
INVALID_REQUEST, with the name "" those versions can carry.
Brokers, controller and partition states (leader, epoch, replicas, ISR, offline replicas;
LEADER_NOT_AVAILABLE while the leader is not live) come from the cluster metadata.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.quota_throttle import MutationQuota
from kafkalite.broker import views
from kafkalite.broker.admin_manager import topic_name_error
from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.partition import PartitionState
from kafkalite.broker.replica_manager import INTERNAL_TOPICS, OFFSETS_TOPIC
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

ZERO_UUID = uuid.UUID(int=0)
BY_ID_FROM = 12
log = logging.getLogger(__name__)

_DESCRIBE, _TOPIC = AclOperation.DESCRIBE, ResourceType.TOPIC


def _partition(ctx: RequestContext, state: PartitionState, live: set[int]) -> Any:
    leader = state.leader if state.leader in live else -1
    return make(
        ctx.schema.MetadataResponsePartition,
        error_code=ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
        partition_index=state.partition,
        leader_id=leader,
        leader_epoch=state.leader_epoch,
        replica_nodes=state.replicas,
        isr_nodes=state.isr,
        offline_replicas=tuple(r for r in state.replicas if r not in live),
    )


def _topic(ctx: RequestContext, topic: TopicMetadata, operations: int) -> Any:
    metadata = ctx.broker.metadata
    states = views.partition_states(metadata, topic)
    if len(states) < topic.num_partitions:
        # Some partitions' states are not known here yet (the controller writes them one by
        # one; this broker reads them as they come). Kafka's cache holds a topic with all its
        # partitions or not at all, and answers one being created LEADER_NOT_AVAILABLE: a
        # client shown fewer partitions would refuse records for the others.
        return _error_topic(ctx, topic.name, topic.topic_id, ErrorCode.leader_not_available)
    live = {b.broker_id for b in metadata.brokers()}
    return make(
        ctx.schema.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=tuple(_partition(ctx, s, live) for s in states),
        topic_authorized_operations=authorized_operations.allowed(
            ctx, operations, _TOPIC, topic.name
        ),
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


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (KafkaApis)."""
    return ctx.authorized_cluster(AclOperation.CREATE) or ctx.authorized(
        AclOperation.CREATE, _TOPIC, name
    )


def _lookup(ctx: RequestContext, requested: Any, auto_create: bool, operations: int) -> Any:
    metadata = ctx.broker.metadata
    topic_id = getattr(requested, "topic_id", None) or ZERO_UUID
    name = requested.name
    if name is None:
        if ctx.api_version < BY_ID_FROM:
            return _error_topic(ctx, "", topic_id, ErrorCode.invalid_request)
        topic = metadata.topic_by_id(topic_id)
        if topic is None:
            return _error_topic(ctx, None, topic_id, ErrorCode.unknown_topic_id)
        if not ctx.authorized(_DESCRIBE, _TOPIC, topic.name):  # the name stays hidden
            return _error_topic(ctx, None, topic_id, ErrorCode.topic_authorization_failed)
        return _topic(ctx, topic, operations)
    if not ctx.authorized(_DESCRIBE, _TOPIC, name):
        return _error_topic(ctx, name, ZERO_UUID, ErrorCode.topic_authorization_failed)
    topic = metadata.topics.get(name)
    if topic is not None:
        return _topic(ctx, topic, operations)
    if topic_name_error(name):
        return _error_topic(ctx, name, ZERO_UUID, ErrorCode.invalid_topic_exception)
    if not auto_create:
        return _error_topic(ctx, name, ZERO_UUID, ErrorCode.unknown_topic_or_partition)
    if not _may_create(ctx, name):
        return _error_topic(ctx, name, ZERO_UUID, ErrorCode.topic_authorization_failed)
    if name == OFFSETS_TOPIC:
        # Created with its fixed settings, as the group coordinator would.
        ctx.broker.groups.ensure_offsets_topic()
        created = metadata.topics.get(name)
        if created is None:
            return _error_topic(ctx, name, ZERO_UUID, ErrorCode.coordinator_not_available)
        return _topic(ctx, created, operations)
    outcome, _ = ctx.broker.admin_manager.create_topic(name)
    created = metadata.topics.get(name)
    if created is None:
        return _error_topic(ctx, name, ZERO_UUID, outcome.error)
    log.info("auto-created topic %s: %d partition(s)", name, created.num_partitions)
    # Kafka's auto-creation takes from the client's controller mutation quota, permissively
    # (it never refuses, and the Metadata answer is not throttled for it).
    MutationQuota(ctx, strict=False).record(created.num_partitions)
    return _topic(ctx, created, operations)


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    allow = getattr(request, "allow_auto_topic_creation", True)
    auto_create = allow and broker.config.bool("auto.create.topics.enable")
    operations = authorized_operations.when(
        getattr(request, "include_topic_authorized_operations", False), authorized_operations.TOPIC
    )
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = tuple(
            _topic(ctx, t, operations)
            for t in broker.metadata.topics.values()
            if ctx.authorized(_DESCRIBE, _TOPIC, t.name, log_denied=False)  # hidden, silently
        )
    else:
        # A topic another broker has just created may not have reached this cache yet.
        await broker.metadata.catch_up([t.name for t in request.topics if t.name is not None])
        topics = tuple(
            _lookup(ctx, requested, auto_create, operations) for requested in request.topics
        )
    brokers = tuple(
        make(
            ctx.schema.MetadataResponseBroker,
            node_id=info.broker_id,
            host=endpoint.host,
            port=endpoint.port,
            rack=info.rack,
        )
        for info in broker.metadata.brokers()
        if (endpoint := broker.endpoint_of(info.broker_id, ctx.listener)) is not None
    )
    return make(
        ctx.schema.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id(),
        topics=topics,
        cluster_authorized_operations=authorized_operations.cluster(
            ctx, getattr(request, "include_cluster_authorized_operations", False)
        ),
        error_code=ErrorCode.none,
    )


API = ApiHandler(api_key=3, min_version=0, max_version=13, handle=handle, is_async=True)
