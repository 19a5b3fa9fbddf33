"""Produce (key 0), versions 3-13 served (v13 names topics by id, KIP-516); 0-2 advertised
and refused (see produce_legacy).

Batches are appended as the client sent them (offsets patched, CRC checked) without decoding
records, through the replica manager (which refuses internal topics and, for acks=-1, an ISR
below min.insync.replicas). acks=0 gets no response; acks=1 is answered after the append;
acks=-1 once the high watermark covers it (at once on a single node, whose ISR is itself),
or REQUEST_TIMED_OUT after the request's timeout (at most request.timeout.ms).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import produce_legacy
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.leader_hint import current_leader, node_endpoints
from kafkalite.apis.quota_throttle import record_bandwidth, throttle_time
from kafkalite.apis.topic_ids import topic_name
from kafkalite.broker.delayed import ProduceResult, TopicPartition
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.views import view_refusal
from kafkalite.protocol.entities import make, millis
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.storage.batch import HEADER_SIZE, LOG_OVERHEAD, parse_header, peek_offset_and_size
from kafkalite.storage.errors import RecordError

VALID_ACKS = (-1, 0, 1)
ADMIN_CLIENT_ID = "__admin_client"  # Kafka lets this client id write internal topics


def _partition_response(
    ctx: RequestContext,
    index: int,
    error: ErrorCode,
    base_offset: int = -1,
    log_append_time_ms: int = -1,
    log_start_offset: int = -1,
    message: str | None = None,
    record_errors: tuple[RecordError, ...] = (),
    **leader: Any,
) -> Any:
    append_time = (
        datetime.datetime.fromtimestamp(log_append_time_ms / 1000, tz=datetime.UTC)
        if log_append_time_ms >= 0
        else None
    )
    return make(
        ctx.schema.PartitionProduceResponse,
        index=index,
        error_code=error,
        base_offset=base_offset,
        log_append_time=append_time,
        log_start_offset=log_start_offset,
        record_errors=tuple(
            make(
                ctx.schema.BatchIndexAndErrorMessage,
                batch_index=error.batch_index,
                batch_index_error_message=error.message,
            )
            for error in record_errors
        ),
        error_message=message,
        **leader,
    )


def _holds_several_batches(records: bytes) -> bool:
    """Kafka's ProduceRequest.validateRecords: v3+ carries one batch per partition.

    Only the first batch's framing is read here; storage validates the batch itself.
    """
    if len(records) < LOG_OVERHEAD:
        return False
    return peek_offset_and_size(records, 0)[1] < len(records)


def _check_partition(
    ctx: RequestContext, topic: str, data: Any
) -> ErrorCode | str | ProduceResult | None:
    """What KafkaApis answers before the replica manager: unknown partitions (a view:
    read-only), then Kafka's ProduceRequest.validateRecords (an error code, or a message
    for INVALID_RECORD)."""
    manager = ctx.broker.replica_manager
    if manager.partition(topic, data.index) is None:
        view = manager.view(topic)
        if view is not None:
            return ProduceResult(ErrorCode.invalid_topic_exception, message=view_refusal(view))
        return ErrorCode.unknown_topic_or_partition
    if data.records is None or len(data.records) == 0:
        return "no record batches"
    if _holds_several_batches(data.records):
        return (
            "Produce requests with version 3 and above must contain exactly one "
            "record batch per partition"
        )
    return None


@dataclass(frozen=True, slots=True)
class Unverified:
    """A transactional batch whose coordinator is another broker: ask it first."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def _verify_txn(
    ctx: RequestContext, request: Any, topic: str, data: Any
) -> ErrorCode | Unverified | None:
    """Kafka's transaction verification (KIP-890 part 1,
    transaction.partition.verification.enable): a transactional batch is taken only for a
    partition in its producer's ongoing transaction; otherwise INVALID_TXN_STATE (a stale
    epoch: INVALID_PRODUCER_EPOCH). Checked here when this broker is the coordinator; else
    the coordinator is asked (broker/txn_verification.py) unless the producer already has
    its transaction open on this partition at this epoch."""
    transactional_id = getattr(request, "transactional_id", None)
    service = ctx.broker.txn
    # Most produces carry no transactional id: no header to parse for them.
    if not transactional_id or not service or len(data.records) < HEADER_SIZE:
        return None  # (storage answers a batch too short for a header)
    header = parse_header(data.records)
    if header.magic != 2 or not header.is_transactional:
        return None
    if not ctx.broker.config.bool("transaction.partition.verification.enable"):
        return None
    if service.check_coordinator(transactional_id) is not ErrorCode.none:
        partition = ctx.broker.replica_manager.partition(topic, data.index)
        entry = partition.log.producer_state.last_entry(header.producer_id) if partition else None
        if (
            entry is not None
            and entry.current_txn_first_offset >= 0
            and entry.producer_epoch == header.producer_epoch
        ):
            return None  # verified when the transaction began here
        return Unverified(transactional_id, header.producer_id, header.producer_epoch)
    verdict = service.coordinator.verify_partitions(
        transactional_id, header.producer_id, header.producer_epoch, [(topic, data.index)]
    )[(topic, data.index)]
    if verdict is ErrorCode.none:
        return None
    if verdict is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode.invalid_txn_state


def _refused(ctx: RequestContext, index: int, problem: ErrorCode | str | ProduceResult) -> Any:
    if isinstance(problem, ProduceResult):
        return _partition_response(ctx, index, problem.error, message=problem.message)
    if isinstance(problem, str):
        return _partition_response(ctx, index, ErrorCode.invalid_record, message=problem)
    return _partition_response(ctx, index, problem)


def _answered(ctx: RequestContext, tp: TopicPartition, result: ProduceResult) -> Any:
    return _partition_response(
        ctx,
        tp[1],
        result.error,
        base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
        message=result.message,
        record_errors=result.record_errors,
        **current_leader(ctx, tp[0], tp[1], result.error),
    )


async def _append(
    ctx: RequestContext, entries: dict[TopicPartition, bytes], acks: int, timeout_ms: int
) -> dict[TopicPartition, ProduceResult]:
    """Append through the replica manager; acks=all waits for the high watermark."""
    manager = ctx.broker.replica_manager
    results, delayed = manager.append_records(
        entries, acks, internal_topics_allowed=ctx.client_id == ADMIN_CLIENT_ID
    )
    if delayed is not None:
        await complete_or_expire(manager.produce_purgatory, delayed, timeout_ms)
        results = delayed.results
    return results


async def _verify_remotely(
    ctx: RequestContext, unverified: dict[Unverified, list[TopicPartition]]
) -> dict[TopicPartition, ProduceResult]:
    """Ask the coordinators; the partitions they refused, with the error to answer."""
    refused: dict[TopicPartition, ProduceResult] = {}
    service = ctx.broker.txn
    for txn, partitions in unverified.items():
        assert service is not None
        answers = await service.verifier.verify(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions
        )
        refused.update(
            {
                tp: ProduceResult(error)
                for tp, error in answers.items()
                if error is not ErrorCode.none
            }
        )
    return refused


def _transactional_id_denied(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """KafkaApis: a produce of transactional batches needs a transactional id and WRITE on
    it, else every partition fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    if ctx.authorizer is None:
        return None
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is None:
        return ErrorCode.transactional_id_authorization_failed if _any_txn(request) else None
    if ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return None
    return ErrorCode.transactional_id_authorization_failed


def _any_txn(request: Any) -> bool:
    """Does the request carry a transactional batch (RequestUtils.hasTransactionalRecords)?"""
    return any(
        data.records is not None
        and len(data.records) >= HEADER_SIZE
        and (header := parse_header(data.records)).magic == 2
        and header.is_transactional
        for topic_data in request.topic_data
        for data in topic_data.partition_data
    )


def _topic_denied(ctx: RequestContext, name: str | None) -> ErrorCode | None:
    """WRITE on the topic, checked before whether it exists (as Kafka does)."""
    if name is None or ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, name):
        return None
    return ErrorCode.topic_authorization_failed


async def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    # (topic_data, per partition: an early answer or the key of its append)
    plan: list[tuple[Any, list[Any]]] = []
    entries: dict[TopicPartition, bytes] = {}
    unverified: dict[Unverified, list[TopicPartition]] = {}
    txn_denied = _transactional_id_denied(ctx, request)
    for topic_data in request.topic_data:
        name = topic_name(ctx, topic_data)
        denied = txn_denied or _topic_denied(ctx, name)
        answers: list[Any] = []
        for data in topic_data.partition_data:
            if acks not in VALID_ACKS:
                answers.append(
                    _partition_response(ctx, data.index, ErrorCode.invalid_required_acks)
                )
            elif name is None:
                answers.append(_partition_response(ctx, data.index, ErrorCode.unknown_topic_id))
            elif denied is not None:
                answers.append(_partition_response(ctx, data.index, denied))
            elif (problem := _check_partition(ctx, name, data)) is not None:
                answers.append(_refused(ctx, data.index, problem))
            elif isinstance(txn := _verify_txn(ctx, request, name, data), ErrorCode):
                answers.append(_partition_response(ctx, data.index, txn))
            else:
                entries[(name, data.index)] = data.records
                answers.append((name, data.index))
                if txn is not None:
                    unverified.setdefault(txn, []).append((name, data.index))
        plan.append((topic_data, answers))
    refused = await _verify_remotely(ctx, unverified)
    for tp in refused:
        del entries[tp]
    # The request's timeout, capped by the broker's request.timeout.ms.
    timeout_ms = min(millis(request.timeout), ctx.broker.config.int("request.timeout.ms"))
    results = await _append(ctx, entries, acks, timeout_ms) if entries else {}
    results.update(refused)
    # Kafka counts the request's size against producer_byte_rate, acks=0 included.
    quota = ctx.broker.quotas.produce
    throttle_ms = record_bandwidth(ctx, quota, ctx.request_size) if quota.enabled else 0
    if acks == 0:
        return None
    responses = tuple(
        make(
            ctx.schema.TopicProduceResponse,
            name=getattr(topic_data, "name", None),
            topic_id=getattr(topic_data, "topic_id", None),
            partition_responses=tuple(
                _answered(ctx, answer, results[answer]) if isinstance(answer, tuple) else answer
                for answer in answers
            ),
        )
        for topic_data, answers in plan
    )
    answers = [p for topic in responses for p in topic.partition_responses]
    return make(
        ctx.schema.ProduceResponse,
        responses=responses,
        throttle_time=throttle_time(throttle_ms),
        node_endpoints=node_endpoints(ctx, answers),
    )


API = ApiHandler(
    api_key=0,
    min_version=0,
    max_version=13,
    handle=handle,
    is_async=True,
    legacy=produce_legacy.answer,
    legacy_below=3,
)
