"""UpdateFeatures (key 57), versions 0-2 (`kafka-features upgrade|downgrade|disable`).

Levels are fixed (broker/features.py): an update to the finalized level succeeds and changes
nothing; any other fails the whole request with INVALID_UPDATE_VERSION and the reason, as
Kafka's controller answers (no per-feature rows then). A success carries one NONE row per
feature in v0-1 (its message "NONE", Errors.NONE.message() as Kafka sends it); v2 has no rows.
`validate_only` (v1+) changes nothing either way.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker import features
from kafkalite.protocol.entities import NO_THROTTLE, has_field, make
from kafkalite.security.acl import AclOperation


def _upgrade_type(update: Any) -> int:
    if has_field(type(update), "upgrade_type"):
        return update.upgrade_type
    return features.SAFE_DOWNGRADE if update.allow_downgrade else features.UPGRADE


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    updates = [
        (update.feature, update.max_version_level, _upgrade_type(update))
        for update in request.feature_updates
    ]
    error, message = ErrorCode.cluster_authorization_failed, None
    if ctx.authorized_cluster(AclOperation.ALTER):
        error, message = features.check_updates(ctx.broker.node_id, updates)
    rows: tuple[Any, ...] = ()
    if error == ErrorCode.none and has_field(schema.UpdateFeaturesResponse, "results"):
        rows = tuple(
            make(
                schema.UpdatableFeatureResult, feature=name, error_code=error, error_message="NONE"
            )
            for name, _, _ in updates
        )
    return make(
        schema.UpdateFeaturesResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        results=rows,
    )


API = ApiHandler(api_key=57, min_version=0, max_version=2, handle=handle)
