"""Fetch (key 1), versions 4-18.

Through the replica manager's fetch_messages. Long poll: answer once `min_bytes` are
available or `max_wait_ms` has passed; a waiting fetch is parked in the fetch purgatory under
its partitions, counts the bytes that arrive there by log position (broker/delayed.py) and
reads them once, when it answers. Followers (replica_id >= 0)
read to the log end, consumers to the high watermark (read_committed: to the last stable
offset, with the aborted transactions in the fetched range). Whole batches only, within
`max_bytes` and each partition's `partition_max_bytes` (the first batch is returned whole
even when larger: KIP-74).
Fetch sessions are declined (session id 0), so every request is a full fetch. Topics are
named by id from v13.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.leader_hint import current_leader, node_endpoints
from kafkalite.apis.quota_throttle import record_bandwidth, throttle_time
from kafkalite.broker.client_quota_manager import ClientQuotaManager
from kafkalite.broker.delayed import FetchInfo, FetchParams
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.partition import LogReadResult
from kafkalite.protocol.entities import NO_THROTTLE, make, millis
from kafkalite.security.acl import AclOperation, ResourceType

READ_UNCOMMITTED = 0
MAX_BYTES_UNLIMITED = 2**31 - 1


def _replica_id(request: Any) -> int:
    """Followers name themselves in replica_state from v15, in replica_id before."""
    state = getattr(request, "replica_state", None)
    return state.replica_id if state is not None else getattr(request, "replica_id", -1)


def _params(ctx: RequestContext, request: Any, max_wait_ms: int) -> FetchParams:
    replica_id = _replica_id(request)
    max_bytes = request.max_bytes if request.max_bytes is not None else MAX_BYTES_UNLIMITED
    min_bytes = request.min_bytes
    quota = ctx.broker.quotas.fetch
    if quota.enabled and replica_id < 0:
        # Kafka: no more than a quota window allows, else the consumer is throttled for sure
        window_bytes = quota.max_value_in_quota_window(ctx.quota_user, ctx.quota_client_id)
        max_bytes = int(min(max_bytes, window_bytes))
        min_bytes = min(min_bytes, max_bytes)
    return FetchParams(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=getattr(request, "isolation_level", READ_UNCOMMITTED),
        replica_id=replica_id,
    )


def _resolve_topic(ctx: RequestContext, fetch_topic: Any) -> tuple[str | None, ErrorCode]:
    """By the cluster metadata: a topic with no replica here is still known (its partitions
    answer NOT_LEADER_OR_FOLLOWER, not UNKNOWN_TOPIC_ID)."""
    metadata = ctx.broker.metadata
    if ctx.api_version >= 13:
        topic = metadata.topic_by_id(fetch_topic.topic_id)
        return (topic.name, ErrorCode.none) if topic else (None, ErrorCode.unknown_topic_id)
    if fetch_topic.topic in metadata.topics:
        return fetch_topic.topic, ErrorCode.none
    return None, ErrorCode.unknown_topic_or_partition


def _denied(ctx: RequestContext, topic: str, from_follower: bool, cluster_denied: bool) -> bool:
    """KafkaApis: followers need CLUSTER_ACTION on the cluster, consumers READ on each topic
    (checked before whether it exists); else TOPIC_AUTHORIZATION_FAILED."""
    if from_follower:
        return cluster_denied
    return not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic)


def _fetch_infos(
    ctx: RequestContext, request: Any
) -> tuple[list[FetchInfo], list[tuple[Any, list[FetchInfo | ErrorCode]]]]:
    """The partitions to read, and per requested topic what answers each partition."""
    infos: list[FetchInfo] = []
    plan: list[tuple[Any, list[FetchInfo | ErrorCode]]] = []
    from_follower = _replica_id(request) >= 0
    cluster_denied = from_follower and not ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    for fetch_topic in request.topics:
        name, error = _resolve_topic(ctx, fetch_topic)
        requested = name if name is not None else getattr(fetch_topic, "topic", None)
        if requested is not None and _denied(ctx, requested, from_follower, cluster_denied):
            name, error = None, ErrorCode.topic_authorization_failed
        answers: list[FetchInfo | ErrorCode] = []
        for part in fetch_topic.partitions:
            if name is None:
                answers.append(error)
                continue
            info = FetchInfo(
                name,
                part.partition,
                part.fetch_offset,
                part.partition_max_bytes,
                getattr(part, "current_leader_epoch", -1),
                getattr(part, "last_fetched_epoch", -1),
                getattr(part, "log_start_offset", -1),
            )
            infos.append(info)
            answers.append(info)
        plan.append((fetch_topic, answers))
    return infos, plan


def _aborted(ctx: RequestContext, result: LogReadResult, params: FetchParams) -> Any:
    """Kafka lists aborted transactions only for read_committed fetches (null otherwise)."""
    if params.isolation_level == READ_UNCOMMITTED:
        return None
    return tuple(
        make(ctx.schema.AbortedTransaction, producer_id=t.producer_id, first_offset=t.first_offset)
        for t in result.aborted_transactions or ()
    )


def _partition_data(
    ctx: RequestContext, topic: str | None, index: int, result: LogReadResult, params: FetchParams
) -> Any:
    diverging: dict[str, Any] = {}
    if result.diverging_epoch is not None:  # v12+ followers only
        epoch, end_offset = result.diverging_epoch
        diverging["diverging_epoch"] = make(
            ctx.schema.EpochEndOffset, epoch=epoch, end_offset=end_offset
        )
    return make(
        ctx.schema.PartitionData,
        partition_index=index,
        error_code=result.error,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=_aborted(ctx, result, params),
        records=result.records,
        **diverging,
        **(current_leader(ctx, topic, index, result.error) if topic is not None else {}),
    )


def _response(
    ctx: RequestContext,
    params: FetchParams,
    plan: list[tuple[Any, list[FetchInfo | ErrorCode]]],
    results: dict[FetchInfo, LogReadResult],
) -> Any:
    responses = tuple(
        make(
            ctx.schema.FetchableTopicResponse,
            topic=getattr(fetch_topic, "topic", None),
            topic_id=getattr(fetch_topic, "topic_id", uuid.UUID(int=0)),
            partitions=tuple(
                _partition_data(
                    ctx,
                    answer.topic if isinstance(answer, FetchInfo) else None,
                    answer.partition if isinstance(answer, FetchInfo) else part.partition,
                    results[answer] if isinstance(answer, FetchInfo) else LogReadResult(answer),
                    params,
                )
                for part, answer in zip(fetch_topic.partitions, answers, strict=True)
            ),
        )
        for fetch_topic, answers in plan
    )
    return make(
        ctx.schema.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=responses,
        node_endpoints=node_endpoints(ctx, [p for topic in responses for p in topic.partitions]),
    )


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
    infos, plan = _fetch_infos(ctx, request)
    unknown_topic = any(not isinstance(a, FetchInfo) for _, answers in plan for a in answers)
    # Like a partition error, an unknown topic is answered at once.
    max_wait_ms = 0 if unknown_topic else max(millis(request.max_wait), 0)
    params = _params(ctx, request, max_wait_ms)
    manager = ctx.broker.replica_manager
    delayed = manager.fetch_messages(params, infos)
    await complete_or_expire(manager.fetch_purgatory, delayed, max_wait_ms)
    read = delayed.read_result
    remote = ctx.broker.remote_log_manager
    answered = list(read.results)
    if remote is not None and read.has_remote_fetch:  # off the event loop (tiered storage)
        answered = await remote.read_remote(infos, answered, lambda tp: manager.partition(*tp))
    results = dict(zip(infos, answered, strict=True))
    quota = ctx.broker.quotas.fetch
    if quota.enabled and not params.is_from_follower:
        throttle_ms = _fetch_throttle(ctx, quota, results)
        if throttle_ms:
            return _throttled_response(ctx, throttle_ms)
    return _response(ctx, params, plan, results)


def _fetch_throttle(
    ctx: RequestContext, quota: ClientQuotaManager, results: dict[FetchInfo, LogReadResult]
) -> int:
    """KafkaApis: the answer's bytes count against consumer_byte_rate; a throttled fetch
    answers no data, so its bytes are taken back."""
    size = sum(len(result.records) for result in results.values())
    throttle_ms = record_bandwidth(ctx, quota, size)
    if throttle_ms:
        quota.unrecord(ctx.quota_user, ctx.quota_client_id, size, ctx.broker.clock_ms())
    return throttle_ms


def _throttled_response(ctx: RequestContext, throttle_ms: int) -> Any:
    """Kafka's getThrottledResponse: no partitions, the throttle time."""
    return make(
        ctx.schema.FetchResponse,
        throttle_time=throttle_time(throttle_ms),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(),
        node_endpoints=(),
    )


API = ApiHandler(api_key=1, min_version=4, max_version=18, handle=handle, is_async=True)
