"""AddOffsetsToTxn (key 25), versions 0-4.

Adds the group's `__consumer_offsets` partition to the transaction, so the transaction's
end reaches the group coordinator (its TxnOffsetCommits are applied on commit, dropped on
abort). Errors as AddPartitionsToTxn's. Answered once the transaction's new state is
replicated (acks=all), as Kafka's coordinator does: a coordinator that moves right after
must know the partition is in the transaction.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.coordinator import group_partition
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def _add(ctx: RequestContext, request: Any) -> ErrorCode:
    txn = request.transactional_id
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return ErrorCode.transactional_id_authorization_failed
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    service = txn_service(ctx)
    error = service.check_coordinator(request.transactional_id)
    if error is not ErrorCode.none:
        return error
    if ctx.broker.groups.ensure_offsets_topic() is not ErrorCode.none:
        return ErrorCode.coordinator_not_available
    count = ctx.broker.metadata.topics[OFFSETS_TOPIC].num_partitions
    tp = (OFFSETS_TOPIC, group_partition(request.group_id, count))
    result, persist_error = await service.call_and_wait(
        lambda c, now: c.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, [tp], now
        ),
        [request.transactional_id],
    )
    return result if persist_error is ErrorCode.none else persist_error


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = await _add(ctx, request)
    if error is ErrorCode.producer_fenced and ctx.api_version < 2:
        error = ErrorCode.invalid_producer_epoch
    return make(ctx.schema.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=error)


API = ApiHandler(api_key=25, min_version=0, max_version=4, handle=handle, is_async=True)
