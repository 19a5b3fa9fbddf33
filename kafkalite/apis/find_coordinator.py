"""FindCoordinator (key 10), versions 0-6 (batched keys from v4).

A single node coordinates every group; the first group lookup creates `__consumer_offsets`.
Transaction coordination arrives with the transactions issue; until then transactional ids
get UNSUPPORTED_VERSION ("transactions are not supported by kafkalite yet"), the error Kafka
gives for a feature it does not support; clients do not retry it.
librdkafka also reads this API's presence as "broker >= 0.8.2" and enables LZ4 only then.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make

GROUP, TRANSACTION = 0, 1
TRANSACTIONS_UNSUPPORTED = "transactions are not supported by kafkalite yet"


def _locate(ctx: RequestContext, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == GROUP:
        # Like Kafka, the first group lookup creates `__consumer_offsets`.
        return ctx.broker.groups.ensure_offsets_topic(), None
    if key_type == TRANSACTION:
        # Not retriable, so transactional clients fail fast instead of retrying forever
        # (COORDINATOR_NOT_AVAILABLE made librdkafka, kafka-python and franz-go hang), and not
        # an authorization error, which sent users looking for ACLs. InitProducerId answers
        # transactional ids the same way.
        return ErrorCode.unsupported_version, TRANSACTIONS_UNSUPPORTED
    return ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}"


def handle(ctx: RequestContext, request: Any) -> Any:
    listener = ctx.broker.advertised_listener
    key_type = getattr(request, "key_type", GROUP)
    error, message = _locate(ctx, key_type)
    found = error == ErrorCode.none
    where = {
        "node_id": ctx.broker.node_id if found else -1,
        "host": listener.host if found else "",
        "port": listener.port if found else -1,
        "error_code": error,
        "error_message": message,
    }
    if ctx.api_version < 4:
        return make(ctx.schema.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **where)
    coordinators = tuple(
        make(ctx.schema.Coordinator, key=key, **where) for key in request.coordinator_keys
    )
    return make(
        ctx.schema.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators
    )


API = ApiHandler(api_key=10, min_version=0, max_version=6, handle=handle)
