"""DescribeTransactions (key 65), version 0.

The state of each transactional id this broker coordinates (kafka-transactions.sh
describe): state name, timeout, start time (-1 ms when none is open), producer id and
epoch, and the partitions of the ongoing transaction. An unknown id is
TRANSACTIONAL_ID_NOT_FOUND; one coordinated elsewhere NOT_COORDINATOR. Kafka's ACLs: DESCRIBE
on the transactional id, and the partitions of topics without DESCRIBE are left out.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.txn_common import txn_service
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def _state(ctx: RequestContext, transactional_id: str) -> Any:
    service = txn_service(ctx)
    error = service.check_coordinator(transactional_id)
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    meta = None
    if error is ErrorCode.none:  # committed state: answered once the writes before are in
        meta, error = await service.call_and_wait(
            lambda c, _now: c.describe(transactional_id), [transactional_id]
        )
    if error is ErrorCode.none and meta is None:
        error = ErrorCode.transactional_id_not_found
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions if meta else ()):
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_denied=False):
            continue
        by_topic.setdefault(topic, []).append(index)
    return make(
        ctx.schema.TransactionState,
        error_code=error,
        transactional_id=transactional_id,
        transaction_state=meta.state.value if meta else "",
        transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms if meta else 0),
        # Kafka: -1 with no open transaction; an id not found carries the field default 0.
        transaction_start_time=_at(meta.txn_start_ms if meta else 0),
        producer_id=meta.producer_id if meta else -1,
        producer_epoch=meta.producer_epoch if meta else -1,
        topics=tuple(
            make(ctx.schema.TopicData, topic=topic, partitions=tuple(indexes))
            for topic, indexes in by_topic.items()
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(
        ctx.schema.DescribeTransactionsResponse,
        throttle_time=NO_THROTTLE,
        transaction_states=tuple([await _state(ctx, tid) for tid in request.transactional_ids]),
    )


API = ApiHandler(api_key=65, min_version=0, max_version=0, handle=handle, is_async=True)
