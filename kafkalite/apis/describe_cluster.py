"""DescribeCluster (key 60), versions 0-2 (v2 may include fenced brokers: there are none).

A broker endpoint: the cluster id, the live brokers and the controller from the cluster
metadata (Kafka 4 brokers answer some live broker as controller), and the cluster operations
when asked for (all of them: kafkalite has no authorizer). As in Kafka's
AuthHelper.computeDescribeClusterResponse, a v1 request for the controllers endpoint answers
MISMATCHED_ENDPOINT_TYPE and an unknown endpoint type UNSUPPORTED_ENDPOINT_TYPE
(INVALID_REQUEST in v0).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.admin_manager import OK, Outcome
from kafkalite.protocol.entities import NO_THROTTLE, make

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2
_ENDPOINT_NAMES = {ENDPOINT_BROKERS: "BROKER", ENDPOINT_CONTROLLERS: "CONTROLLER"}


def _check_endpoint(ctx: RequestContext, endpoint_type: int) -> Outcome:
    if endpoint_type == ENDPOINT_BROKERS:
        return OK
    if endpoint_type not in _ENDPOINT_NAMES:
        error = ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}"
    else:
        error = ErrorCode.mismatched_endpoint_type
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            f"type {_ENDPOINT_NAMES[endpoint_type]}"
        )
    if ctx.api_version == 0:
        error = ErrorCode.invalid_request
    return Outcome(error, message)


def _error_response(ctx: RequestContext, outcome: Outcome) -> Any:
    return make(
        ctx.schema.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=outcome.error,
        error_message=outcome.message,
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id="",
        controller_id=-1,
        brokers=(),
        cluster_authorized_operations=authorized_operations.OMITTED,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    outcome = _check_endpoint(ctx, getattr(request, "endpoint_type", ENDPOINT_BROKERS))
    if not outcome.ok:
        return _error_response(ctx, outcome)
    broker = ctx.broker
    nodes = tuple(
        make(
            ctx.schema.DescribeClusterBroker,
            broker_id=info.broker_id,
            host=endpoint.host,
            port=endpoint.port,
            rack=info.rack,
            is_fenced=False,  # v2: only live (registered) brokers are listed
        )
        for info in broker.metadata.brokers()
        if (endpoint := broker.endpoint_of(info.broker_id, ctx.listener)) is not None
    )
    operations = authorized_operations.cluster(ctx, request.include_cluster_authorized_operations)
    return make(
        ctx.schema.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id(),
        brokers=nodes,
        cluster_authorized_operations=operations,
    )


API = ApiHandler(api_key=60, min_version=0, max_version=2, handle=handle)
