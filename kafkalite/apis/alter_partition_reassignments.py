"""AlterPartitionReassignments (key 45), versions 0-1 (`kafka-reassign-partitions --execute`).

Answered by the controller, as Kafka's ZooKeeper-era brokers did: another broker answers
NOT_CONTROLLER (the client finds the controller in Metadata and asks it). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicate, negative or not live
new replicas), NO_REASSIGNMENT_IN_PROGRESS for a cancellation (null replicas) of a partition
that is not moving, and from v1 INVALID_REPLICATION_FACTOR when the replica count changes with
allow_replication_factor_change false (KIP-860). A cluster starts the moves in ZooKeeper
(cluster/reassignment_zk.py) and the controller completes them once the new replicas are in
sync. A single node is its own controller with one live broker: only its current assignment
is valid, and that is no move.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.cluster import reassignment
from kafkalite.cluster import zk_data as zd
from kafkalite.protocol.entities import NO_THROTTLE, make

Targets = Mapping[int, tuple[int, ...] | None]
Results = dict[int, reassignment.Refusal | None]  # per partition: None when accepted
UNKNOWN_PARTITION = reassignment.Refusal(
    ErrorCode.unknown_topic_or_partition, "The partition does not exist."
)
NOT_CONTROLLER = reassignment.Refusal(
    ErrorCode.not_controller, "This is not the correct controller for this cluster."
)


def _targets(topic: Any) -> dict[int, tuple[int, ...] | None]:
    return {
        p.partition_index: None if p.replicas is None else tuple(p.replicas)
        for p in topic.partitions
    }


def _single_node(ctx: RequestContext, name: str, targets: Targets, allow_rf: bool) -> Results:
    metadata = ctx.broker.metadata
    live = {b.broker_id for b in metadata.brokers()}
    results: Results = {}
    for index, replicas in targets.items():
        state = metadata.partition_state(name, index)
        if state is None:
            results[index] = UNKNOWN_PARTITION
            continue
        current = zd.ReplicaAssignment(tuple(state.replicas))
        results[index] = reassignment.validate(current, replicas, live, allow_rf)
    return results


async def _results(ctx: RequestContext, request: Any) -> dict[str, Results]:
    allow_rf = getattr(request, "allow_replication_factor_change", True)
    controller = getattr(ctx.broker.metadata, "controller", None)
    if controller is None:
        return {t.name: _single_node(ctx, t.name, _targets(t), allow_rf) for t in request.topics}
    from kafkalite.cluster import reassignment_zk  # cluster mode only: imports kazoo
    from kafkalite.cluster.kafka_zk import ControllerMoved

    live = {b.broker_id for b in ctx.broker.metadata.brokers()}
    results: dict[str, Results] = {}
    for topic in request.topics:
        targets = _targets(topic)
        epoch = controller.epoch
        if epoch is None:
            results[topic.name] = {index: NOT_CONTROLLER for index in targets}
            continue
        try:
            results[topic.name] = await reassignment_zk.start(
                controller.zk, epoch, topic.name, targets, live, allow_rf
            )
        except ControllerMoved:
            results[topic.name] = {index: NOT_CONTROLLER for index in targets}
    return results


def _response(
    ctx: RequestContext, error: reassignment.Refusal | None, results: dict[str, Results]
) -> Any:
    topics = tuple(
        make(
            ctx.schema.ReassignableTopicResponse,
            name=name,
            partitions=tuple(
                make(
                    ctx.schema.ReassignablePartitionResponse,
                    partition_index=index,
                    error_code=refusal.error if refusal else ErrorCode.none,
                    error_message=refusal.message if refusal else None,
                )
                for index, refusal in partitions.items()
            ),
        )
        for name, partitions in results.items()
    )
    return make(
        ctx.schema.AlterPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        error_code=error.error if error else ErrorCode.none,
        error_message=error.message if error else None,
        responses=topics,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.metadata.controller_id() != ctx.broker.node_id:
        return _response(ctx, NOT_CONTROLLER, {})
    return _response(ctx, None, await _results(ctx, request))


API = ApiHandler(api_key=45, min_version=0, max_version=1, handle=handle, is_async=True)
