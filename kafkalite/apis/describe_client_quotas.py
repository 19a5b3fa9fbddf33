"""DescribeClientQuotas (key 48), versions 0-1: the quota entities matching a filter (exact
name, default, any specified name; strict or not) and their values, as Kafka's
ClientQuotasImage.describe answers (broker/client_quotas.py). A filter Kafka refuses fails
the whole request: INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.client_quotas import (
    NOT_STORED,
    Entity,
    FilterComponent,
    InvalidRequest,
    UnsupportedEntityType,
)
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation


def handle(ctx: RequestContext, request: Any) -> Any:
    quotas = ctx.broker.client_quotas
    if not ctx.authorized_cluster(AclOperation.DESCRIBE_CONFIGS):
        return _response(ctx, ErrorCode.cluster_authorization_failed, None, None)
    if not quotas.stored:
        return _response(ctx, ErrorCode.unsupported_version, NOT_STORED, None)
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = quotas.describe(components, request.strict)
    except InvalidRequest as exc:
        return _response(ctx, ErrorCode.invalid_request, str(exc), None)
    except UnsupportedEntityType as exc:
        return _response(ctx, ErrorCode.unsupported_version, str(exc), None)
    return _response(ctx, ErrorCode.none, None, found)


def _response(
    ctx: RequestContext,
    error: ErrorCode,
    message: str | None,
    found: list[tuple[Entity, Any]] | None,
) -> Any:
    schema = ctx.schema
    entries = None
    if found is not None:
        entries = tuple(
            make(
                schema.EntryData,
                entity=tuple(
                    make(schema.EntityData, entity_type=kind, entity_name=name)
                    for kind, name in entity
                ),
                values=tuple(
                    make(schema.ValueData, key=key, value=value)
                    for key, value in sorted(values.items())
                ),
            )
            for entity, values in found
        )
    return make(
        schema.DescribeClientQuotasResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        entries=entries,
    )


API = ApiHandler(api_key=48, min_version=0, max_version=1, handle=handle)
