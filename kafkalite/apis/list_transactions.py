"""ListTransactions (key 66), versions 0-2.

The transactional ids this broker coordinates (kafka-transactions.sh list), filtered by
state names (unknown names are listed back in `unknown_state_filters`), producer ids, v1+
by how long the transaction has been open (`duration_filter` ms) and v2+ by a regular
expression on the id (`transactional_id_pattern`, matched whole as Java's matches()).
"""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.txn.coordinator import TxnMetadata, TxnState

STATE_NAMES = {state.value for state in TxnState}


def _matches(request: Any, meta: TxnMetadata, now_ms: int, pattern: re.Pattern | None) -> bool:
    if request.state_filters and meta.state.value not in request.state_filters:
        return False
    if request.producer_id_filters and meta.producer_id not in request.producer_id_filters:
        return False
    duration = getattr(request, "duration_filter", -1)
    if duration >= 0 and (meta.txn_start_ms < 0 or now_ms - meta.txn_start_ms < duration):
        return False
    return pattern is None or pattern.fullmatch(meta.transactional_id) is not None


def _describable(ctx: RequestContext, transactional_id: str) -> bool:
    """Kafka lists the transactional ids the principal may DESCRIBE."""
    return ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id, log_denied=False
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema.ListTransactionsResponse
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return make(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_regular_expression,
            unknown_state_filters=(),
            transaction_states=(),
        )
    service = txn_service(ctx)
    now = service.now_ms()
    # Committed state: answered once every write to the partitions served here is in.
    transactions, _ = await service.call_and_wait(
        lambda c, _now: list(c.transactions.values()), None
    )
    listed = tuple(
        make(
            ctx.schema.TransactionState,
            transactional_id=meta.transactional_id,
            producer_id=meta.producer_id,
            transaction_state=meta.state.value,
        )
        for meta in sorted(transactions, key=lambda m: m.transactional_id)
        if _matches(request, meta, now, pattern) and _describable(ctx, meta.transactional_id)
    )
    return make(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(s for s in request.state_filters if s not in STATE_NAMES),
        transaction_states=listed,
    )


API = ApiHandler(api_key=66, min_version=0, max_version=2, handle=handle, is_async=True)
