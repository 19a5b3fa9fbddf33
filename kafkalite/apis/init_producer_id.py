"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0 on every
call, as Kafka does; ids are persisted before use so a restart never reuses one.
Transactional producers are not served yet (the transactions issue adds the coordinator):
they get UNSUPPORTED_VERSION, as FindCoordinator answers a transactional id.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema.InitProducerIdResponse
    if request.transactional_id is not None:
        return make(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_version,
            producer_id=-1,
            producer_epoch=-1,
        )
    producer_id = ctx.broker.metadata.allocate_producer_id()
    return make(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=0,
    )


API = ApiHandler(api_key=22, min_version=0, max_version=5, handle=handle)
