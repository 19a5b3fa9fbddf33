"""What the share group handlers share: acknowledgement batches applied to the
share-partitions, the answers' per-partition leader, and whether a group id is a share
group's."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import RequestContext
from kafkalite.apis.leader_hint import REDIRECTING_ERRORS, node_endpoints
from kafkalite.protocol.entities import make
from kafkalite.share.share_partition import AcknowledgementBatch

TopicIdPartition = tuple[uuid.UUID, int]


def batches_of(part: Any) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in part.acknowledgement_batches
    ]


async def acknowledge(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    acks: dict[TopicIdPartition, list[AcknowledgementBatch]],
) -> dict[TopicIdPartition, ErrorCode]:
    """Apply each partition's acknowledgements, then wait until the new states are
    committed: the answer per partition."""
    assert ctx.broker.share_groups is not None
    manager = ctx.broker.share_groups.partitions
    errors: dict[TopicIdPartition, ErrorCode] = {}
    changed = []
    for tp, batches in acks.items():
        error, held = await manager.share_partition(group_id, tp)
        if held is None:
            errors[tp] = error
            continue
        errors[tp] = manager.acknowledge(held, member_id, batches)
        if errors[tp] is ErrorCode.none:
            changed.append((tp, held))
    for tp, held in changed:
        errors[tp] = await manager.persist(held)
    return errors


def is_share_group(ctx: RequestContext, group_id: str) -> bool:
    """A share group of that id exists here (a classic or consumer member may not take it)."""
    service = ctx.broker.share_groups
    return service is not None and group_id in service.coordinator.groups


def leader_of(ctx: RequestContext, topic_id: uuid.UUID, index: int) -> Any:
    """The partition's current leader and epoch (Kafka fills it in every answer)."""
    topic = ctx.broker.metadata.topic_by_id(topic_id)
    state = ctx.broker.metadata.partition_state(topic.name, index) if topic else None
    return make(
        ctx.schema.LeaderIdAndEpoch,
        leader_id=state.leader if state is not None else -1,
        leader_epoch=state.leader_epoch if state is not None else -1,
    )


def redirect_endpoints(ctx: RequestContext, answers: list[Any]) -> tuple[Any, ...]:
    """The endpoints of the leaders named by NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH
    answers (KIP-951); none otherwise, as Kafka."""
    return node_endpoints(ctx, [a for a in answers if a.error_code in REDIRECTING_ERRORS])


def lock_timeout(ctx: RequestContext) -> datetime.timedelta:
    return datetime.timedelta(
        milliseconds=ctx.broker.config.int("group.share.record.lock.duration.ms")
    )
