"""FindCoordinator (key 10), versions 0-6 (batched keys from v4).

A group's coordinator is the leader of its `__consumer_offsets` partition, from the cluster
metadata; the first group lookup creates that topic. A transactional id's (key type 1) is
the leader of its `__transaction_state` partition, created on first lookup likewise; a
share-partition's (key type 2, "group:topicId:partition", KIP-932) the leader of its
`__share_group_state` partition.
librdkafka also reads this API's presence as "broker >= 0.8.2" and enables LZ4 only then.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.coordinator import group_partition
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.share.share_records import SharePartitionKey

GROUP, TRANSACTION, SHARE = 0, 1, 2
Found = tuple[int, Endpoint] | None  # (node id, endpoint) of the coordinator


def _group_coordinator(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, Found]:
    """The leader of the group's `__consumer_offsets` partition (Kafka's partitionFor)."""
    error = ctx.broker.groups.ensure_offsets_topic()
    if error is not ErrorCode.none:
        return error, None
    metadata = ctx.broker.metadata
    topic = metadata.topics[OFFSETS_TOPIC]
    state = metadata.partition_state(OFFSETS_TOPIC, group_partition(group_id, topic.num_partitions))
    endpoint = ctx.broker.endpoint_of(state.leader, ctx.listener) if state is not None else None
    if state is None or endpoint is None:
        return ErrorCode.coordinator_not_available, None
    return ErrorCode.none, (state.leader, endpoint)


def _txn_coordinator(ctx: RequestContext, transactional_id: str) -> tuple[ErrorCode, Found]:
    """The leader of the id's `__transaction_state` partition."""
    assert ctx.broker.txn is not None
    error, leader = ctx.broker.txn.coordinator_for(transactional_id)
    if error is not ErrorCode.none:
        return error, None
    endpoint = ctx.broker.endpoint_of(leader, ctx.listener)
    if endpoint is None:
        return ErrorCode.coordinator_not_available, None
    return ErrorCode.none, (leader, endpoint)


def _share_coordinator(ctx: RequestContext, key: str) -> tuple[ErrorCode, Found]:
    """The leader of the share-partition's `__share_group_state` partition (the key is
    "group:topicId:partition", the topic id in Kafka's base64 form)."""
    parsed = SharePartitionKey.parse(key)
    if ctx.broker.share_groups is None or parsed is None:
        return ErrorCode.invalid_request, None
    runtime = ctx.broker.share_groups.partitions.coordinator.runtime
    if runtime.ensure_topic() is not ErrorCode.none:
        return ErrorCode.coordinator_not_available, None
    index = runtime.partition_for(parsed.coordinator_key())
    state = ctx.broker.metadata.partition_state(runtime.topic, index)
    endpoint = ctx.broker.endpoint_of(state.leader) if state is not None else None
    if state is None or endpoint is None:
        return ErrorCode.coordinator_not_available, None
    return ErrorCode.none, (state.leader, endpoint)


def _locate(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    message: str | None = None
    found: Found = None
    if key_type == GROUP and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        error = ErrorCode.group_authorization_failed
    elif key_type == GROUP:
        error, found = _group_coordinator(ctx, key)
    elif key_type == TRANSACTION and not ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        error = ErrorCode.transactional_id_authorization_failed
    elif key_type == TRANSACTION:
        error, found = _txn_coordinator(ctx, key)
    elif key_type == SHARE:
        error, found = _share_coordinator(ctx, key)
        message = ""  # Kafka answers SHARE keys with an empty message, errors or not
    else:
        error, message = ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}"
    return {
        "node_id": found[0] if found else -1,
        "host": found[1].host if found else "",
        "port": found[1].port if found else -1,
        "error_code": error,
        "error_message": message,
    }


def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", GROUP)
    if ctx.api_version < 4:
        where = _locate(ctx, key_type, request.key)
        return make(ctx.schema.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **where)
    coordinators = tuple(
        make(ctx.schema.Coordinator, key=key, **_locate(ctx, key_type, key))
        for key in request.coordinator_keys
    )
    return make(
        ctx.schema.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators
    )


API = ApiHandler(api_key=10, min_version=0, max_version=6, handle=handle)
