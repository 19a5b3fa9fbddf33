"""Produce (key 0), versions 3-13 served (v13 names topics by id, KIP-516); 0-2 advertised
and refused (see produce_legacy).

Batches are appended as the client sent them (offsets patched, CRC checked) without decoding
records. acks=0 gets no response; acks=1 and acks=-1 are answered after the append (a single
node is the whole ISR), subject to the topic's min.insync.replicas.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import produce_legacy
from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.apis.metadata import INTERNAL_TOPICS
from kafkalite.apis.topic_ids import topic_name
from kafkalite.broker.topic_config import effective_value
from kafkalite.storage.batch import LOG_OVERHEAD, peek_offset_and_size
from kafkalite.storage.errors import RecordError, StorageError

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
    )


def _holds_several_batches(records: bytes) -> bool:
    """Kafka's ProduceRequest.validateRecords: v3+ carries one batch per partition.

    Only the first batch's framing is read here; storage validates the batch itself.
    """
    if len(records) < LOG_OVERHEAD:
        return False
    return peek_offset_and_size(records, 0)[1] < len(records)


def _produce_partition(ctx: RequestContext, topic: str, data: Any, acks: int) -> Any:
    manager = ctx.broker.replica_manager
    partition = manager.partition(topic, data.index)
    if partition is None:
        return _partition_response(ctx, data.index, ErrorCode.unknown_topic_or_partition)
    if topic in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
        # Kafka's ReplicaManager: only the coordinators write their own topics.
        return _partition_response(
            ctx,
            data.index,
            ErrorCode.invalid_topic_exception,
            message=f"Cannot append to internal topic {topic}",
        )
    if data.records is None or len(data.records) == 0:
        return _partition_response(
            ctx, data.index, ErrorCode.invalid_record, message="no record batches"
        )
    if _holds_several_batches(data.records):
        return _partition_response(
            ctx,
            data.index,
            ErrorCode.invalid_record,
            message="Produce requests with version 3 and above must contain exactly one "
            "record batch per partition",
        )
    if acks == -1:
        overrides = manager.topics[topic].metadata.configs
        min_isr = int(effective_value(ctx.broker.config, overrides, "min.insync.replicas")[0])
        if len(partition.isr) < min_isr:
            return _partition_response(ctx, data.index, ErrorCode.not_enough_replicas)
    result = manager.append(partition, data.records)
    if isinstance(result, StorageError):
        # Kafka reports offsets as -1 on a failed append; for record validation errors (its
        # RecordValidationException) also the log start offset, a message and the rejected
        # records (KIP-467) when the check was per record.
        validation = result.error_code in (ErrorCode.invalid_timestamp, ErrorCode.invalid_record)
        return _partition_response(
            ctx,
            data.index,
            result.error_code,
            log_start_offset=partition.log_start_offset if validation else -1,
            message=str(result) if validation else None,
            record_errors=result.record_errors,
        )
    return _partition_response(
        ctx,
        data.index,
        ErrorCode.none,
        base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    responses = []
    for topic_data in request.topic_data:
        name = topic_name(ctx, topic_data)
        if acks not in VALID_ACKS or name is None:
            error = (
                ErrorCode.invalid_required_acks
                if acks not in VALID_ACKS
                else ErrorCode.unknown_topic_id
            )
            partitions = tuple(
                _partition_response(ctx, data.index, error) for data in topic_data.partition_data
            )
        else:
            partitions = tuple(
                _produce_partition(ctx, name, data, acks) for data in topic_data.partition_data
            )
        responses.append(
            make(
                ctx.schema.TopicProduceResponse,
                name=getattr(topic_data, "name", None),
                topic_id=getattr(topic_data, "topic_id", None),
                partition_responses=partitions,
            )
        )
    if acks == 0:
        return None
    return make(ctx.schema.ProduceResponse, responses=tuple(responses), throttle_time=NO_THROTTLE)


API = ApiHandler(
    api_key=0,
    min_version=0,
    max_version=13,
    handle=handle,
    legacy=produce_legacy.answer,
    legacy_below=3,
)
