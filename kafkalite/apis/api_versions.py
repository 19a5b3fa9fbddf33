"""ApiVersions (key 18), versions 0-4.

From v3 it also carries the broker's supported and finalized features (broker/features.py),
which `kafka-features describe` and Admin.describeFeatures print.

Advertises the handler table. An unknown request version is answered in v0 with
UNSUPPORTED_VERSION (see protocol/codec.py), so clients can retry with a version we know.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make, response_module
from kafkalite.broker import features


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
        **_features(schema),
        zk_migration_ready=False,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    return api_versions_response(ctx.api_version)


API = ApiHandler(api_key=18, min_version=0, max_version=4, handle=handle)
