"""TxnOffsetCommit (key 28), versions 0-4.

Offsets a transactional producer commits for a consumer group (send_offsets_to_transaction).
Checked like OffsetCommit against the group's generation / member epoch (v3+, KIP-447:
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID...) and against the producer's
epoch (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH before v2) by the transactional id's
coordinator (another broker is asked, as for a transactional produce), then written to the
group's `__consumer_offsets` partition as a transactional batch of the producer and held by the
group coordinator until the transaction ends: visible on commit, dropped on abort (replay after a
restart follows the markers the same way).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.coordinator import OffsetCommitRequest, group_partition
from kafkalite.coordinator.offset_commit import PartitionCommit
from kafkalite.coordinator.offsets import (
    NO_LEADER_EPOCH,
    OffsetAndMetadata,
    OffsetChange,
    TopicPartition,
)
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _request(ctx: RequestContext, request: Any) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        request.group_id,
        tuple(
            PartitionCommit(
                topic.name,
                part.partition_index,
                part.committed_offset,
                getattr(part, "committed_leader_epoch", NO_LEADER_EPOCH),
                part.committed_metadata,
            )
            for topic in request.topics
            for part in topic.partitions
        ),
        # The member epoch of consumer-protocol groups is checked as OffsetCommit v9 does.
        api_version=9,
        generation_id=getattr(request, "generation_id", -1),
        member_id=getattr(request, "member_id", ""),
        group_instance_id=getattr(request, "group_instance_id", None),
    )


async def _producer_error(ctx: RequestContext, request: Any) -> ErrorCode:
    """The producer checked by its transaction coordinator: here when this broker is it, else
    asked (Kafka verifies the group's `__consumer_offsets` partition with the coordinator,
    KIP-890). The group and the transactional id usually have different coordinators."""
    service = txn_service(ctx)
    if service.check_coordinator(request.transactional_id) is not ErrorCode.none:
        return await _verify_remotely(ctx, request)
    meta = service.coordinator.describe(request.transactional_id)
    if meta is None or meta.producer_id != request.producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if meta.producer_epoch != request.producer_epoch:
        return _fenced(ctx)
    return ErrorCode.none


async def _verify_remotely(ctx: RequestContext, request: Any) -> ErrorCode:
    if ctx.broker.groups.ensure_offsets_topic() is not ErrorCode.none:
        return ErrorCode.coordinator_not_available
    count = ctx.broker.metadata.topics[OFFSETS_TOPIC].num_partitions
    tp = (OFFSETS_TOPIC, group_partition(request.group_id, count))
    answers = await txn_service(ctx).verifier.verify(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp]
    )
    # The verifier answers as for a produce; Kafka's group coordinator normalises those.
    error = answers[tp]
    if error is ErrorCode.invalid_producer_epoch:
        return _fenced(ctx)
    if error is ErrorCode.not_enough_replicas:
        return ErrorCode.coordinator_not_available
    return error


def _fenced(ctx: RequestContext) -> ErrorCode:
    return ErrorCode.producer_fenced if ctx.api_version >= 2 else ErrorCode.invalid_producer_epoch


def _denied(ctx: RequestContext, request: Any) -> ErrorCode | None:
    txn = request.transactional_id
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return ErrorCode.transactional_id_authorization_failed
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    return None


async def _errors(ctx: RequestContext, request: Any) -> dict[tuple[str, int], ErrorCode]:
    """KafkaApis: WRITE on the transactional id and READ on the group (else every
    partition fails), READ on each topic (else its partitions fail, the rest commit)."""
    commit = _request(ctx, request)
    keys = [(p.topic, p.partition) for p in commit.partitions]
    if (denied := _denied(ctx, request)) is not None:
        return dict.fromkeys(keys, denied)
    unreadable = {
        t for t, _ in keys if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t)
    }
    if unreadable:
        commit = replace(
            commit, partitions=tuple(p for p in commit.partitions if p.topic not in unreadable)
        )
        errors = await _errors_of(ctx, request, commit) if commit.partitions else {}
        refused = ErrorCode.topic_authorization_failed
        return {**errors, **{k: refused for k in keys if k[0] in unreadable}}
    return await _errors_of(ctx, request, commit)


async def _errors_of(
    ctx: RequestContext, request: Any, commit: OffsetCommitRequest
) -> dict[tuple[str, int], ErrorCode]:
    keys = [(p.topic, p.partition) for p in commit.partitions]
    error = ctx.broker.groups.check_group(commit.group_id)
    if error is not ErrorCode.none:
        return dict.fromkeys(keys, error)
    error = await _producer_error(ctx, request)
    if error is not ErrorCode.none:
        return dict.fromkeys(keys, error)
    response, _ = await ctx.broker.groups.call_and_wait(
        lambda c, now: c.txn_commit_offsets(commit, request.producer_id), [commit.group_id]
    )
    errors = {(p.topic, p.partition): p.error for p in response.partitions}
    accepted = [p for p in commit.partitions if errors[(p.topic, p.partition)] is ErrorCode.none]
    if accepted:
        now = ctx.broker.clock_ms()
        changes = [
            OffsetChange(
                commit.group_id,
                TopicPartition(p.topic, p.partition),
                OffsetAndMetadata(p.offset, p.leader_epoch, p.metadata or "", now),
            )
            for p in accepted
        ]
        error = await ctx.broker.groups.append_txn_offsets(
            commit.group_id, request.producer_id, request.producer_epoch, changes
        )
        if error is not ErrorCode.none:
            if error is ErrorCode.producer_fenced and ctx.api_version < 2:
                error = ErrorCode.invalid_producer_epoch
            errors.update(((p.topic, p.partition), error) for p in accepted)
    return errors


async def handle(ctx: RequestContext, request: Any) -> Any:
    errors = await _errors(ctx, request)
    topics = tuple(
        make(
            ctx.schema.TxnOffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    ctx.schema.TxnOffsetCommitResponsePartition,
                    partition_index=part.partition_index,
                    error_code=errors[(topic.name, part.partition_index)],
                )
                for part in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(ctx.schema.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=28, min_version=0, max_version=4, handle=handle, is_async=True)
