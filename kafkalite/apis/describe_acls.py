"""DescribeAcls (key 29), versions 1-3 (Kafka 4 removed v0; kio has no v0 schema).

Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED). The bindings the filter
matches (LITERAL, PREFIXED, ANY, or MATCH: every pattern that applies to the named
resource), grouped by resource pattern as Kafka's DescribeAclsResponse.aclsResources does.
Without an authorizer: SECURITY_DISABLED with "No Authorizer is configured on the broker"
(`kafka-acls --list` prints that error).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclBinding, AclBindingFilter, AclOperation, ResourcePattern

NO_AUTHORIZER = "No Authorizer is configured on the broker"
UNKNOWN_FILTER = "The filter contains UNKNOWN elements"


def _resources(ctx: RequestContext, bindings: list[AclBinding]) -> tuple[Any, ...]:
    schema = ctx.schema
    grouped: dict[ResourcePattern, list[Any]] = {}
    for binding in bindings:
        entry = binding.entry
        grouped.setdefault(binding.pattern, []).append(
            make(
                schema.AclDescription,
                principal=entry.principal,
                host=entry.host,
                operation=entry.operation,
                permission_type=entry.permission,
            )
        )
    return tuple(
        make(
            schema.DescribeAclsResource,
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=tuple(acls),
        )
        for pattern, acls in grouped.items()
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    error, message, resources = ErrorCode.none, None, ()
    if ctx.authorizer is None:
        error, message = ErrorCode.security_disabled, NO_AUTHORIZER
    elif not ctx.authorized_cluster(AclOperation.DESCRIBE):
        error = ErrorCode.cluster_authorization_failed
    elif (acl_filter := AclBindingFilter.from_wire(request)).unknown:
        error, message = ErrorCode.invalid_request, UNKNOWN_FILTER
    else:
        resources = _resources(ctx, ctx.authorizer.acls(acl_filter))
    return make(
        ctx.schema.DescribeAclsResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        resources=resources,
    )


API = ApiHandler(api_key=29, min_version=1, max_version=3, handle=handle)
