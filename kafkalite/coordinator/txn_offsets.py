"""TxnOffsetCommit on the group side (Kafka's OffsetMetadataManager with a producer id):
offsets committed inside a transaction are checked like any commit (generation / member
epoch, KIP-447) but held pending per (group, producer id) until the transaction ends; the
commit marker applies them, the abort marker drops them."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    PartitionCommit,
    PartitionResult,
    _store_commits,
    _validate_consumer_group_commit,
    validate_offset_commit,
)
from kafkalite.coordinator.states import GroupState


@dataclass(eq=False)
class PendingTxnOffsets:
    by_producer: dict[tuple[str, int], OffsetCommitRequest] = field(default_factory=dict)


def _validate(ctx: Context, request: OffsetCommitRequest) -> ErrorCode:
    consumer_group = ctx.consumer_groups.get(request.group_id)
    if consumer_group is not None:
        return _validate_consumer_group_commit(consumer_group, request)
    group = ctx.groups.get(request.group_id)
    if group is None:
        # A group the coordinator does not know takes commits without generation only.
        return ErrorCode.none if request.generation_id < 0 else ErrorCode.illegal_generation
    return validate_offset_commit(
        group, request.member_id, request.group_instance_id, request.generation_id
    )


def txn_commit_offsets(
    ctx: Context, pending: PendingTxnOffsets, request: OffsetCommitRequest, producer_id: int
) -> OffsetCommitResponse:
    error = _validate(ctx, request)
    if error is ErrorCode.none:
        key = (request.group_id, producer_id)
        held = pending.by_producer.get(key)
        partitions = request.partitions
        if held is not None:
            newer = {(p.topic, p.partition) for p in partitions}
            partitions = (
                tuple(p for p in held.partitions if (p.topic, p.partition) not in newer)
                + partitions
            )
        pending.by_producer[key] = OffsetCommitRequest(
            request.group_id, partitions, request.api_version
        )
    return OffsetCommitResponse(
        tuple(PartitionResult(p.topic, p.partition, error) for p in request.partitions)
    )


def complete_txn(
    ctx: Context,
    pending: PendingTxnOffsets,
    group_id: str,
    producer_id: int,
    commit: bool,
    now_ms: int,
) -> None:
    request = pending.by_producer.pop((group_id, producer_id), None)
    if request is None or not commit:
        return
    if group_id not in ctx.groups and group_id not in ctx.consumer_groups:
        # As an OffsetCommit without generation: a "simple" group holding offsets only.
        ctx.groups[group_id] = ClassicGroup(group_id, GroupState.EMPTY, now_ms)
    _store_commits(ctx, request, now_ms)


def load_pending(
    pending: PendingTxnOffsets, group_id: str, producer_id: int, commit: PartitionCommit
) -> None:
    """Replay: a transactional offset whose transaction had not ended at the log's end."""
    key = (group_id, producer_id)
    held = pending.by_producer.get(key)
    others = (
        ()
        if held is None
        else tuple(
            p for p in held.partitions if (p.topic, p.partition) != (commit.topic, commit.partition)
        )
    )
    pending.by_producer[key] = OffsetCommitRequest(group_id, (*others, commit), 9)


def pending_groups(pending: PendingTxnOffsets, producer_id: int) -> list[str]:
    return [group for group, pid in pending.by_producer if pid == producer_id]


def has_pending(pending: PendingTxnOffsets, group_id: str, topic: str, partition: int) -> bool:
    return any(
        group == group_id
        and any((p.topic, p.partition) == (topic, partition) for p in r.partitions)
        for (group, _), r in pending.by_producer.items()
    )
