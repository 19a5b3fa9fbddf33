"""AlterConfigs (key 33), versions 0-2: the pre-incremental API (kafka-python, older tools).

A TOPIC resource's configs replace all of the topic's overrides (what is not named returns
to its default), validated and stored as IncrementalAlterConfigs does; a BROKER resource's
configs replace all of its dynamic broker configs the same way.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.incremental_alter_configs import alter_resource, answer_each_resource_once
from kafkalite.broker.admin_manager import OK, Outcome
from kafkalite.protocol.entities import NO_THROTTLE, make


async def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    names = [config.name for config in resource.configs]
    if len(set(names)) != len(names):
        return Outcome(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [config.name for config in resource.configs if config.value is None]
    if nulls:
        return Outcome(
            ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"
        )
    replacement = {config.name: config.value for config in resource.configs}
    return await alter_resource(
        ctx, resource, lambda _current: (OK, dict(replacement)), validate_only
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    responses = await answer_each_resource_once(
        ctx, request.resources, lambda resource: _alter(ctx, resource, request.validate_only)
    )
    return make(ctx.schema.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=responses)


API = ApiHandler(api_key=33, min_version=0, max_version=2, handle=handle, is_async=True)
