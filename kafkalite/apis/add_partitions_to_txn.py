"""AddPartitionsToTxn (key 24), versions 0-5.

v0-3 (clients): add the partitions to the transaction of one transactional id; every
partition is answered with the one outcome (an unknown partition fails the request:
UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for the others, as Kafka; a
view's partition, read-only, fails it the same way with INVALID_TOPIC_EXCEPTION).
v4+ (brokers, KIP-890): a batch of transactions, each possibly `verify_only` (is the
partition already in the ongoing transaction? INVALID_TXN_STATE when not); a top-level
error only for the whole request.
Adds are answered once the transaction's new state is replicated (acks=all), as Kafka's
coordinator does: a coordinator that moves right after must know the partitions, or the
next produce fails its verification and the commit writes no marker there.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

TopicPartition = tuple[str, int]


def _partitions(topics: Any) -> list[TopicPartition]:
    return [(topic.name, index) for topic in topics for index in topic.partitions]


def _denied(
    ctx: RequestContext, transactional_id: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode] | None:
    """KafkaApis, for clients (v0-3): WRITE on the transactional id, then on every topic
    (the partitions of the others are not attempted)."""
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    denied = {
        t for t, _ in partitions if not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, t)
    }
    if not denied:
        return None
    return {
        tp: ErrorCode.topic_authorization_failed
        if tp[0] in denied
        else ErrorCode.operation_not_attempted
        for tp in partitions
    }


async def _add(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: list[TopicPartition],
    verify_only: bool,
) -> dict[TopicPartition, ErrorCode]:
    # Clients' versions (< 4) need WRITE; brokers' batches were allowed by CLUSTER_ACTION.
    client = ctx.api_version < 4
    if client and (denied := _denied(ctx, transactional_id, partitions)) is not None:
        return denied
    service = txn_service(ctx)
    error = service.check_coordinator(transactional_id)
    if error is ErrorCode.none:
        # The cluster's partitions, hosted here or not (Kafka asks its metadata cache).
        unknown = [tp for tp in partitions if ctx.broker.metadata.partition_state(*tp) is None]
        # A view is read-only: in a transaction it would wait forever for its markers.
        views = [tp for tp in partitions if ctx.broker.replica_manager.view(tp[0]) is not None]
        if unknown or views:
            return {
                tp: ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else ErrorCode.invalid_topic_exception
                if tp in views
                else ErrorCode.operation_not_attempted
                for tp in partitions
            }
    if error is not ErrorCode.none:
        return dict.fromkeys(partitions, error)
    if verify_only:
        result, _ = await service.call_and_wait(
            lambda c, now: c.verify_partitions(transactional_id, producer_id, epoch, partitions),
            [transactional_id],
        )
        return result
    added, persist_error = await service.call_and_wait(
        lambda c, now: c.add_partitions(transactional_id, producer_id, epoch, partitions, now),
        [transactional_id],
    )
    return dict.fromkeys(partitions, added if persist_error is ErrorCode.none else persist_error)


def _topic_results(ctx: RequestContext, errors: dict[TopicPartition, ErrorCode]) -> Any:
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, index), error in errors.items():
        if error is ErrorCode.producer_fenced and ctx.api_version < 2:
            error = ErrorCode.invalid_producer_epoch
        by_topic.setdefault(topic, []).append((index, error))
    return tuple(
        make(
            ctx.schema.AddPartitionsToTxnTopicResult,
            name=topic,
            results_by_partition=tuple(
                make(
                    ctx.schema.AddPartitionsToTxnPartitionResult,
                    partition_index=index,
                    partition_error_code=error,
                )
                for index, error in results
            ),
        )
        for topic, results in by_topic.items()
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema.AddPartitionsToTxnResponse
    if ctx.api_version < 4:
        errors = await _add(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            _partitions(request.v3_and_below_topics),
            False,
        )
        return make(
            schema,
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=_topic_results(ctx, errors),
        )
    if not ctx.authorized_cluster(AclOperation.CLUSTER_ACTION):  # v4+: brokers' batches
        return make(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )
    results = []
    for txn in request.transactions:
        errors = await _add(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            _partitions(txn.topics),
            txn.verify_only,
        )
        results.append(
            make(
                ctx.schema.AddPartitionsToTxnResult,
                transactional_id=txn.transactional_id,
                topic_results=_topic_results(ctx, errors),
            )
        )
    return make(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(results),
    )


API = ApiHandler(api_key=24, min_version=0, max_version=5, handle=handle, is_async=True)
