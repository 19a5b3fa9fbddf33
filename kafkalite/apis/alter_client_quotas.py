"""AlterClientQuotas (key 49), versions 0-1: set or remove quotas of user, client-id and
(user, client-id) entities and their defaults, with validate_only, and Kafka's per-entity
INVALID_REQUEST messages (broker/client_quotas.py). Applied quotas are enforced at once."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.client_quotas import Alteration, entity_of
from kafkalite.broker.controller_api import ApiError
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation


async def handle(ctx: RequestContext, request: Any) -> Any:
    alterations = [
        Alteration(
            entity_of([(e.entity_type, e.entity_name) for e in entry.entity]),
            tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops),
        )
        for entry in request.entries
    ]
    if ctx.authorized_cluster(AclOperation.ALTER_CONFIGS):
        results = await ctx.broker.client_quotas.alter(alterations, request.validate_only)
    else:  # every entity, refused (Kafka's getErrorResponse)
        refused = ApiError(ErrorCode.cluster_authorization_failed)
        results = [(alteration.entity, refused) for alteration in alterations]
    schema = ctx.schema
    return make(
        schema.AlterClientQuotasResponse,
        throttle_time=NO_THROTTLE,
        entries=tuple(
            make(
                schema.EntryData,
                error_code=error.error,
                error_message=error.message,
                entity=tuple(
                    make(schema.EntityData, entity_type=kind, entity_name=name)
                    for kind, name in entity
                ),
            )
            for entity, error in results
        ),
    )


API = ApiHandler(api_key=49, min_version=0, max_version=1, handle=handle, is_async=True)
