"""Kafka's inter-broker share-state RPCs (KIP-932), served by the share coordinator of the
share-partition's `__share_group_state` partition (broker/share_coordinator_service.py):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85, v0-1),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87, v0-1), each registered by its
own module (apis/read_share_group_state.py, ...). A partition leader on
another broker sends them (broker/share_persister.py). Brokers only: ClusterAction on the
cluster, as Kafka's KafkaApis, else CLUSTER_AUTHORIZATION_FAILED for every partition.

Per partition: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS where this broker does not serve
its state partition now; FENCED_LEADER_EPOCH for an older leader, FENCED_STATE_EPOCH for an
older state epoch; INVALID_REQUEST for a null topic id or a negative partition. A
share-partition without state reads as start offset -1. State batches are merged as ranges
(share_records.apply_update), so a batch's span costs nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.read_share_group_state.v0.response import StateBatch as ReadStateBatch

from kafkalite.apis.base import RequestContext
from kafkalite.broker.share_coordinator_service import ShareCoordinatorService
from kafkalite.protocol.entities import make
from kafkalite.security.acl import AclOperation
from kafkalite.share.share_partition import StateBatch
from kafkalite.share.share_records import SharePartitionKey, delivery_complete_count

UNINITIALIZED = -1
NO_STATE: dict[str, Any] = {"state_epoch": 0, "start_offset": UNINITIALIZED, "state_batches": ()}
NO_SUMMARY: dict[str, Any] = {"state_epoch": 0, "leader_epoch": 0, "start_offset": UNINITIALIZED}
# One partition's answer: its error and the fields of its result beside partition/error.
Answer = tuple[ErrorCode, dict[str, Any]]
PartitionHandler = Callable[[ShareCoordinatorService, SharePartitionKey, Any], Awaitable[Answer]]


async def _serve(
    ctx: RequestContext,
    request: Any,
    on_partition: PartitionHandler,
    names: tuple[str, str, str],  # the response, its per-topic and per-partition classes
    unanswered: dict[str, Any] | None = None,  # a result's other fields, with an error
) -> Any:
    response_cls, topic_cls, partition_cls = (getattr(ctx.schema, n) for n in names)
    allowed = ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    share_groups = ctx.broker.share_groups
    results = []
    for topic in request.topics:
        partitions = []
        for data in topic.partitions:
            key = SharePartitionKey(request.group_id, topic.topic_id, data.partition)
            fields: dict[str, Any] = {}
            if not allowed:
                error = ErrorCode.cluster_authorization_failed
            elif topic.topic_id is None or data.partition < 0:  # Kafka's ShareCoordinatorShard
                error = ErrorCode.invalid_request
            elif share_groups is None:
                error = ErrorCode.coordinator_not_available
            else:
                coordinator = share_groups.partitions.coordinator
                error = coordinator.runtime.check(key.coordinator_key())
                if error is ErrorCode.none:
                    error, fields = await on_partition(coordinator, key, data)
            if error is not ErrorCode.none:
                fields = unanswered or {}
            partitions.append(
                make(partition_cls, partition=data.partition, error_code=error, **fields)
            )
        results.append(make(topic_cls, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return make(response_cls, results=tuple(results))


# -- per partition -------------------------------------------------------------------------


async def _initialize(coordinator: ShareCoordinatorService, key: Any, data: Any) -> Answer:
    if coordinator.fenced(key, -1, data.state_epoch) is not ErrorCode.none:
        return ErrorCode.fenced_state_epoch, {}
    return await coordinator.initialize_state(key, data.start_offset), {}


async def _read(coordinator: ShareCoordinatorService, key: Any, data: Any) -> Answer:
    error, state = await coordinator.read_state_for_leader(key, data.leader_epoch)
    if error is not ErrorCode.none or state is None:
        return error, NO_STATE
    return ErrorCode.none, {
        "state_epoch": state.state_epoch,
        "start_offset": state.start_offset,
        "state_batches": tuple(
            make(
                ReadStateBatch,
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=b.delivery_state,
                delivery_count=b.delivery_count,
            )
            for b in state.batches
        ),
    }


async def _write(coordinator: ShareCoordinatorService, key: Any, data: Any) -> Answer:
    batches = [
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in data.state_batches
    ]
    error = await coordinator.write_state(
        key, data.leader_epoch, data.start_offset, batches, data.state_epoch
    )
    return error, {}


async def _delete(coordinator: ShareCoordinatorService, key: Any, data: Any) -> Answer:
    if key not in coordinator.states:
        return ErrorCode.none, {}
    return await coordinator.delete_state([key]), {}


async def _summary(coordinator: ShareCoordinatorService, key: Any, data: Any) -> Answer:
    error, state = coordinator.read_state(key)
    if state is None:
        return error, NO_SUMMARY
    if 0 <= data.leader_epoch < state.leader_epoch:
        return ErrorCode.fenced_leader_epoch, NO_SUMMARY
    return ErrorCode.none, {
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "delivery_complete_count": delivery_complete_count(state),
    }


# -- handlers ------------------------------------------------------------------------------


async def initialize(ctx: RequestContext, request: Any) -> Any:
    names = ("InitializeShareGroupStateResponse", "InitializeStateResult", "PartitionResult")
    return await _serve(ctx, request, _initialize, names)


async def read(ctx: RequestContext, request: Any) -> Any:
    names = ("ReadShareGroupStateResponse", "ReadStateResult", "PartitionResult")
    return await _serve(ctx, request, _read, names, NO_STATE)


async def write(ctx: RequestContext, request: Any) -> Any:
    names = ("WriteShareGroupStateResponse", "WriteStateResult", "PartitionResult")
    return await _serve(ctx, request, _write, names)


async def delete(ctx: RequestContext, request: Any) -> Any:
    names = ("DeleteShareGroupStateResponse", "DeleteStateResult", "PartitionResult")
    return await _serve(ctx, request, _delete, names)


async def summary(ctx: RequestContext, request: Any) -> Any:
    names = ("ReadShareGroupStateSummaryResponse", "ReadStateSummaryResult", "PartitionResult")
    return await _serve(ctx, request, _summary, names, NO_SUMMARY)
