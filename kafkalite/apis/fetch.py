"""Fetch (key 1), versions 4-16.

Long poll: answer once `min_bytes` are available or `max_wait_ms` has passed, re-reading
as soon as any append lands. Whole batches only, within `max_bytes` and each partition's
`partition_max_bytes` (the first batch is returned whole even when larger: KIP-74).
Fetch sessions are declined (session id 0), so every request is a full fetch. Topics are
named by id from v13.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.broker.replica_manager import Partition, Topic
from kafkalite.storage.errors import OffsetOutOfRangeError

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@dataclass
class _FetchState:
    """What the partitions of one fetch share: the byte budget and the isolation level."""

    remaining: int
    isolation_level: int = READ_UNCOMMITTED
    first: bool = True  # the first partition with data may exceed the limits (KIP-74)


def _partition_data(
    ctx: RequestContext,
    state: _FetchState,
    index: int,
    error: ErrorCode,
    partition: Partition | None = None,
    records: bytes = b"",
) -> Any:
    """A partition's answer; like Kafka, one with an error (no `partition`) has -1 offsets."""
    high_watermark = partition.high_watermark if partition else -1
    return make(
        ctx.schema.PartitionData,
        partition_index=index,
        error_code=error,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=partition.log_start_offset if partition else -1,
        # Kafka lists aborted transactions only for read_committed fetches; there are none
        # yet (no transactions), so read_committed gets an empty list.
        aborted_transactions=() if state.isolation_level == READ_COMMITTED else None,
        records=records,
    )


def _read_partition(
    ctx: RequestContext, topic: Topic, request: Any, state: _FetchState
) -> tuple[Any, int]:
    index = request.partition
    partition, error = ctx.broker.replica_manager.leader_partition(
        topic.name, index, getattr(request, "current_leader_epoch", -1)
    )
    if partition is None or error != ErrorCode.none:
        return _partition_data(ctx, state, index, error), 0
    limit = min(request.partition_max_bytes, state.remaining)
    try:
        records = partition.log.read(
            request.fetch_offset, limit, partition.high_watermark, min_one_batch=state.first
        )
    except OffsetOutOfRangeError:
        return _partition_data(ctx, state, index, ErrorCode.offset_out_of_range), 0
    if records:
        state.first = False
        state.remaining = max(state.remaining - len(records), 0)
    return _partition_data(ctx, state, index, ErrorCode.none, partition, records), len(records)


def _resolve_topic(ctx: RequestContext, fetch_topic: Any) -> tuple[Topic | None, ErrorCode]:
    manager = ctx.broker.replica_manager
    if ctx.api_version >= 13:
        topic = manager.topic_by_id(fetch_topic.topic_id)
        return topic, ErrorCode.none if topic else ErrorCode.unknown_topic_id
    topic = manager.topics.get(fetch_topic.topic)
    return topic, ErrorCode.none if topic else ErrorCode.unknown_topic_or_partition


def read_fetch(ctx: RequestContext, request: Any) -> tuple[Any, int, bool]:
    """One pass over every requested partition: (response, bytes read, any partition error)."""
    state = _FetchState(
        request.max_bytes if request.max_bytes is not None else 2**31 - 1,
        getattr(request, "isolation_level", READ_UNCOMMITTED),
    )
    total, failed, responses = 0, False, []
    for fetch_topic in request.topics:
        topic, topic_error = _resolve_topic(ctx, fetch_topic)
        partitions = []
        for part in fetch_topic.partitions:
            if topic is None:
                partitions.append(_partition_data(ctx, state, part.partition, topic_error))
                failed = True
                continue
            data, size = _read_partition(ctx, topic, part, state)
            failed = failed or data.error_code != ErrorCode.none
            total += size
            partitions.append(data)
        responses.append(
            make(
                ctx.schema.FetchableTopicResponse,
                topic=getattr(fetch_topic, "topic", None),
                topic_id=getattr(fetch_topic, "topic_id", uuid.UUID(int=0)),
                partitions=tuple(partitions),
            )
        )
    response = make(
        ctx.schema.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(responses),
        node_endpoints=(),
    )
    return response, total, failed


def _session_error(ctx: RequestContext, request: Any) -> Any | None:
    """We hand out no fetch sessions, so an incremental fetch names one we do not know."""
    if ctx.api_version >= 7 and request.session_id != 0:
        return make(
            ctx.schema.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
            node_endpoints=(),
        )
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    session_error = _session_error(ctx, request)
    if session_error is not None:
        return session_error
    max_wait_s = max(request.max_wait.total_seconds(), 0.0)
    deadline = trio.current_time() + max_wait_s
    while True:
        arrived = ctx.broker.data_arrived  # taken before reading, so no append is missed
        response, total, failed = read_fetch(ctx, request)
        if total >= request.min_bytes or failed or trio.current_time() >= deadline:
            return response
        with trio.move_on_at(deadline):
            await arrived.wait()


API = ApiHandler(api_key=1, min_version=4, max_version=18, handle=handle, is_async=True)
