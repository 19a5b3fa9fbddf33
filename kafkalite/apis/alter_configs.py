"""AlterConfigs (key 33), versions 0-2: the pre-incremental API (kafka-python, older tools).

A TOPIC resource's configs replace all of the topic's overrides (what is not named returns
to its default), validated and stored as IncrementalAlterConfigs does; BROKER resources are
refused the same way (kafkalite has no dynamic broker configs).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.apis.incremental_alter_configs import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    alter_broker,
    alter_topic,
    resource_response,
)
from kafkalite.broker.replica_manager import OK, Outcome


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    names = [config.name for config in resource.configs]
    if len(set(names)) != len(names):
        return Outcome(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [config.name for config in resource.configs if config.value is None]
    if nulls:
        return Outcome(
            ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"
        )
    replacement = {config.name: config.value for config in resource.configs}
    if resource.resource_type == RESOURCE_TOPIC:
        return alter_topic(
            ctx, resource.resource_name, lambda _current: (OK, dict(replacement)), validate_only
        )
    if resource.resource_type == RESOURCE_BROKER:
        return alter_broker(ctx, resource)
    return Outcome(ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}")


def handle(ctx: RequestContext, request: Any) -> Any:
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        if counts[resource.resource_type, resource.resource_name] > 1:
            outcome = Outcome(ErrorCode.invalid_request, "Each resource must appear at most once.")
        else:
            outcome = _alter(ctx, resource, request.validate_only)
        responses.append(resource_response(ctx, resource, outcome))
    return make(
        ctx.schema.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses)
    )


API = ApiHandler(api_key=33, min_version=0, max_version=2, handle=handle)
