"""ShareFetch (key 78), versions 1-2 (v2: acquire mode and RENEW acknowledgements,
KIP-1222): share sessions, acknowledgements, then records acquired for the member.

Epoch 0 opens the member's share session with the partitions listed (it may not carry
acknowledgements); later epochs add partitions, drop `forgotten_topics_data` and must follow
one another; -1 applies the acknowledgements, releases what the member still holds in the
session's partitions and closes it. Records are read committed, whole batches, up to
`max_records` (exceeded to finish a batch in the batch-optimized mode; exactly, in v2's
record-limit mode); a fetch that
acquires nothing waits up to `max_wait` for records to acquire. Acknowledgements are
answered once their state is committed in `__share_group_state`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.quota_throttle import record_bandwidth
from kafkalite.apis.share_acks import (
    TopicIdPartition,
    acknowledge,
    batches_of,
    leader_of,
    lock_timeout,
    redirect_endpoints,
)
from kafkalite.broker.share_partition_manager import ShareFetchResult
from kafkalite.protocol.entities import NO_THROTTLE, make, millis
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.share.share_partition import AcknowledgementBatch
from kafkalite.share.share_session import FINAL_EPOCH, INITIAL_EPOCH

DEFAULT_MAX_RECORDS = 500
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareAcquireMode (v2)


def _error(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    return make(
        ctx.schema.ShareFetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=lock_timeout(ctx),
        responses=(),
        node_endpoints=(),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if service is None:
        return _error(ctx, ErrorCode.unsupported_version)
    if not request.group_id or not request.member_id:
        return _error(ctx, ErrorCode.invalid_request, "GroupId and MemberId must be set.")
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ctx, ErrorCode.group_authorization_failed)
    manager = service.partitions
    key = (request.group_id, request.member_id)
    epoch = request.share_session_epoch
    listed = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    acks: dict[TopicIdPartition, list[AcknowledgementBatch]] = {
        (t.topic_id, p.partition_index): batches_of(p)
        for t in request.topics
        for p in t.partitions
        if p.acknowledgement_batches
    }
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    if epoch == INITIAL_EPOCH:
        if acks:  # acknowledgements need a session (Kafka gives no message)
            return _error(ctx, ErrorCode.invalid_request)
        error, session = manager.sessions.open(key, listed, ctx.connection_id)
        manager.forget_idle(key, listed)
    elif epoch == FINAL_EPOCH:
        session = manager.sessions.close(key)
        error = ErrorCode.none if session is not None else ErrorCode.share_session_not_found
    else:
        error, session = manager.sessions.advance(key, epoch, listed, forgotten)
    if session is None:
        return _error(ctx, error)

    ack_errors = await acknowledge(ctx, request.group_id, request.member_id, acks)
    results: dict[TopicIdPartition, ShareFetchResult] = {}
    if epoch == FINAL_EPOCH:
        for held in manager.release_member(request.group_id, request.member_id, session.partitions):
            await manager.persist(held)
    elif not getattr(request, "is_renew_ack", False):
        results = await _fetch(ctx, request, list(session.partitions))
        _record_fetched_bytes(ctx, results)
    wanted = set(acks) | {
        tp for tp, r in results.items() if r.error is not ErrorCode.none or r.acquired
    }
    if epoch == INITIAL_EPOCH:
        wanted |= set(listed)
    return _response(ctx, wanted, results, ack_errors)


async def _fetch(
    ctx: RequestContext, request: Any, partitions: list[TopicIdPartition]
) -> dict[TopicIdPartition, ShareFetchResult]:
    """Acquire from the session's partitions; when nothing was acquired, wait for records
    up to max_wait and try again."""
    assert ctx.broker.share_groups is not None
    manager = ctx.broker.share_groups.partitions
    results: dict[TopicIdPartition, ShareFetchResult] = {}
    helds = []
    for tp in partitions:
        topic = ctx.broker.metadata.topic_by_id(tp[0])
        if topic is not None and not ctx.authorized(
            AclOperation.READ, ResourceType.TOPIC, topic.name
        ):
            results[tp] = ShareFetchResult(ErrorCode.topic_authorization_failed)
            continue
        error, held = await manager.share_partition(request.group_id, tp)
        if held is None:
            results[tp] = ShareFetchResult(error)
        else:
            helds.append((tp, held))
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    record_limit = getattr(request, "share_acquire_mode", BATCH_OPTIMIZED) == RECORD_LIMIT
    deadline = trio.current_time() + max(millis(request.max_wait), 0) / 1000
    max_bytes = _max_bytes(ctx, request.max_bytes)
    while True:
        remaining_records, remaining_bytes = max_records, max_bytes
        for tp, held in helds:
            if remaining_records <= 0 or remaining_bytes <= 0:
                break
            result = manager.acquire(
                held, request.member_id, remaining_records, remaining_bytes, record_limit
            )
            if result.error is not ErrorCode.none or result.acquired:
                results[tp] = result
            remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            remaining_bytes -= len(result.records)
        wait_ms = int((deadline - trio.current_time()) * 1000)
        if results or wait_ms <= 0 or not helds:  # records acquired, or errors, or time up
            return results
        await manager.wait_for_records([h for _, h in helds], wait_ms)


def _max_bytes(ctx: RequestContext, requested: int) -> int:
    """Kafka: no more than a quota window allows, else the member is throttled for sure."""
    quota = ctx.broker.quotas.fetch
    if not quota.enabled:
        return requested
    window_bytes = quota.max_value_in_quota_window(ctx.quota_user, ctx.quota_client_id)
    return int(min(requested, window_bytes))


def _record_fetched_bytes(
    ctx: RequestContext, results: dict[TopicIdPartition, ShareFetchResult]
) -> None:
    """The records' bytes against consumer_byte_rate; over it, the answer is throttled."""
    quota = ctx.broker.quotas.fetch
    if quota.enabled:
        record_bandwidth(ctx, quota, sum(len(result.records) for result in results.values()))


def _response(
    ctx: RequestContext,
    wanted: set[TopicIdPartition],
    results: dict[TopicIdPartition, ShareFetchResult],
    ack_errors: dict[TopicIdPartition, ErrorCode],
) -> Any:
    schema = ctx.schema
    by_topic: dict = defaultdict(list)
    for topic_id, index in sorted(wanted):
        result = results.get((topic_id, index), ShareFetchResult())
        by_topic[topic_id].append(
            make(
                schema.PartitionData,
                partition_index=index,
                error_code=result.error,
                acknowledge_error_code=ack_errors.get((topic_id, index), ErrorCode.none),
                current_leader=leader_of(ctx, topic_id, index),
                records=result.records,
                acquired_records=tuple(
                    make(
                        schema.AcquiredRecords,
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in result.acquired
                ),
            )
        )
    answers = [p for parts in by_topic.values() for p in parts]
    return make(
        schema.ShareFetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=lock_timeout(ctx),
        responses=tuple(
            make(schema.ShareFetchableTopicResponse, topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_topic.items()
        ),
        node_endpoints=redirect_endpoints(ctx, answers),
    )


API = ApiHandler(api_key=78, min_version=1, max_version=2, handle=handle, is_async=True)
