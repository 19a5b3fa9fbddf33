"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0 on every
call, as Kafka does; ids are persisted before use so a restart never reuses one.
Transactional producers go to the transaction coordinator (this broker must lead the id's
`__transaction_state` partition): a new id starts at epoch 0, a known one gets its epoch
bumped (fencing the previous instance; an open transaction is aborted first and the
caller answered CONCURRENT_TRANSACTIONS, to retry). v3+ may name the current producer id
and epoch (KIP-360); a mismatch is PRODUCER_FENCED. A timeout above
transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.protocol.entities import NO_THROTTLE, make, millis
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.txn.coordinator import InitResult


async def _transactional(ctx: RequestContext, request: Any) -> InitResult:
    service = txn_service(ctx)
    error = service.check_coordinator(request.transactional_id)
    if error is not ErrorCode.none:
        return InitResult(error)
    timeout_ms = millis(request.transaction_timeout)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    result, persist_error = await service.call_and_wait(
        lambda c, now: c.init_producer_id(
            request.transactional_id, timeout_ms, now, producer_id, epoch
        ),
        [request.transactional_id],
    )
    return result if persist_error is ErrorCode.none else InitResult(persist_error)


def _denied(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """KafkaApis: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (KIP-679)."""
    if request.transactional_id is not None:
        if ctx.authorized(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if ctx.authorized_cluster(AclOperation.IDEMPOTENT_WRITE, log_denied=False):
        return None
    if ctx.authorized_any(AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema.InitProducerIdResponse
    if (denied := _denied(ctx, request)) is not None:
        return make(
            schema, throttle_time=NO_THROTTLE, error_code=denied, producer_id=-1, producer_epoch=-1
        )
    if request.transactional_id is not None:
        result = await _transactional(ctx, request)
        error = result.error
        if error is ErrorCode.producer_fenced and ctx.api_version < 4:
            error = ErrorCode.invalid_producer_epoch  # PRODUCER_FENCED arrived with v4
        return make(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error,
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )
    producer_id = ctx.broker.metadata.allocate_producer_id()
    return make(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=0,
    )


API = ApiHandler(api_key=22, min_version=0, max_version=5, handle=handle, is_async=True)
