"""ApiVersions (key 18), versions 0-4.

From v3 it also carries the broker's supported and finalized features (broker/features.py),
which `kafka-features describe` and Admin.describeFeatures print.

Advertises the handler table it is part of (apis/registry.py builds it with `api`). An
unknown request version is answered in v0 with UNSUPPORTED_VERSION (see protocol/codec.py),
so clients can retry with a version we know.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker import features
from kafkalite.protocol.entities import NO_THROTTLE, make, response_module


def _features(schema: ModuleType) -> dict[str, Any]:
    """The feature fields of v3+ (older versions have none)."""
    if not hasattr(schema, "SupportedFeatureKey"):
        return {}
    supported = tuple(
        make(
            schema.SupportedFeatureKey,
            name=f.name,
            min_version=f.min_version,
            max_version=f.max_version,
        )
        for f in features.FEATURES
    )
    finalized = tuple(
        make(
            schema.FinalizedFeatureKey,
            name=f.name,
            min_version_level=f.finalized,
            max_version_level=f.finalized,
        )
        for f in features.finalized()
    )
    return {
        "supported_features": supported,
        "finalized_features_epoch": features.FINALIZED_EPOCH,
        "finalized_features": finalized,
    }


@cache
def _api_keys(version: int, table: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    """The advertised keys, built once per version: brokers probe each other with
    ApiVersions every 200 ms, and building ~70 entities each time was a tenth of an idle
    broker's CPU."""
    schema = response_module(API_KEY, version)
    return tuple(
        make(schema.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, low, high in table
    )


def api_versions_response(
    handlers: Mapping[int, ApiHandler], version: int, error: ErrorCode = ErrorCode.none
) -> Any:
    schema = response_module(API_KEY, version)
    table = tuple(sorted((h.api_key, h.min_version, h.max_version) for h in handlers.values()))
    return make(
        schema.ApiVersionsResponse,
        error_code=error,
        api_keys=_api_keys(version, table),
        throttle_time=NO_THROTTLE,
        **_features(schema),
        zk_migration_ready=False,
    )


def api(handlers: Mapping[int, ApiHandler]) -> ApiHandler:
    """The ApiVersions handler advertising `handlers` (the table it is put in)."""

    def handle(ctx: RequestContext, request: Any) -> Any:
        return api_versions_response(handlers, ctx.api_version)

    return ApiHandler(api_key=API_KEY, min_version=0, max_version=4, handle=handle)


API_KEY = 18
