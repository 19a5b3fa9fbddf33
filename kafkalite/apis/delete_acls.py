"""DeleteAcls (key 31), versions 1-3 (Kafka 4 removed v0; kio has no v0 schema).

Needs ALTER on the cluster (else every filter fails with CLUSTER_AUTHORIZATION_FAILED).
Each filter removes every binding it matches (MATCH and ANY filters included) and lists
them; a filter with UNKNOWN elements fails with INVALID_REQUEST, as Kafka's
AclControlManager.validateFilter. Without an authorizer Kafka fails every filter with
SECURITY_DISABLED and "No Authorizer is configured." (DeleteAclsRequest.getErrorResponse).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclBinding, AclBindingFilter, AclOperation

NO_AUTHORIZER = "No Authorizer is configured."
UNKNOWN_FILTER = "Unknown patternFilter or entryFilter."


def _result(
    ctx: RequestContext, error: ErrorCode, message: str | None, deleted: list[AclBinding]
) -> Any:
    schema = ctx.schema
    matching = tuple(
        make(
            schema.DeleteAclsMatchingAcl,
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=binding.pattern.resource_type,
            resource_name=binding.pattern.name,
            pattern_type=binding.pattern.pattern_type,
            principal=binding.entry.principal,
            host=binding.entry.host,
            operation=binding.entry.operation,
            permission_type=binding.entry.permission,
        )
        for binding in deleted
    )
    return make(
        schema.DeleteAclsFilterResult,
        error_code=error,
        error_message=message,
        matching_acls=matching,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.authorizer is None:
        results = [_result(ctx, ErrorCode.security_disabled, NO_AUTHORIZER, [])] * len(
            request.filters
        )
    elif not ctx.authorized_cluster(AclOperation.ALTER):
        error = ErrorCode.cluster_authorization_failed
        results = [_result(ctx, error, None, [])] * len(request.filters)
    else:
        filters = [AclBindingFilter.from_wire(f) for f in request.filters]
        valid = [f for f in filters if not f.unknown]
        deleted = iter(await ctx.authorizer.delete_acls(valid))
        results = [
            _result(ctx, ErrorCode.invalid_request, UNKNOWN_FILTER, [])
            if f.unknown
            else _result(ctx, ErrorCode.none, None, next(deleted))
            for f in filters
        ]
    return make(
        ctx.schema.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(results)
    )


API = ApiHandler(api_key=31, min_version=1, max_version=3, handle=handle, is_async=True)
