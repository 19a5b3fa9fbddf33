"""ApiVersions (key 18), versions 0-4.

Advertises the handler table. An unknown request version is answered in v0 with
UNSUPPORTED_VERSION (see protocol/codec.py), so clients can retry with a version we know.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make, response_module


def api_versions_response(version: int, error: ErrorCode = ErrorCode.none) -> Any:
    from kafkalite.apis.registry import HANDLERS  # the table includes this module

    schema = response_module(18, version)
    keys = tuple(
        make(
            schema.ApiVersion,
            api_key=h.api_key,
            min_version=h.min_version,
            max_version=h.max_version,
        )
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    )
    return make(
        schema.ApiVersionsResponse,
        error_code=error,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    return api_versions_response(ctx.api_version)


API = ApiHandler(api_key=18, min_version=0, max_version=4, handle=handle)
