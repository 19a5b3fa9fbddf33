"""EndTxn (key 26), versions 0-4.

Commit or abort the producer's transaction: the coordinator persists PrepareCommit /
PrepareAbort, writes the markers to every partition of the transaction (and applies or
drops its pending offsets), then persists CompleteCommit / CompleteAbort before answering.
A retry of a finished EndTxn gets NONE; the opposite outcome, or no transaction, is
INVALID_TXN_STATE; a stale epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


async def _end(ctx: RequestContext, request: Any) -> ErrorCode:
    txn = request.transactional_id
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return ErrorCode.transactional_id_authorization_failed
    service = txn_service(ctx)
    error = service.check_coordinator(request.transactional_id)
    if error is not ErrorCode.none:
        return error
    result, persist_error = await service.call_and_wait(
        lambda c, now: c.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            now,
        ),
        [request.transactional_id],
    )
    return result if persist_error is ErrorCode.none else persist_error


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = await _end(ctx, request)
    if error is ErrorCode.producer_fenced and ctx.api_version < 2:
        error = ErrorCode.invalid_producer_epoch
    return make(ctx.schema.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=error)


API = ApiHandler(api_key=26, min_version=0, max_version=4, handle=handle, is_async=True)
