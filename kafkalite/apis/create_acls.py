"""CreateAcls (key 30), versions 1-3 (Kafka 4 removed v0; kio has no v0 schema).

Needs ALTER on the cluster (else every creation fails with CLUSTER_AUTHORIZATION_FAILED).
Each creation is validated as Kafka's AclApis and AclControlManager do (INVALID_REQUEST with
their messages); the valid ones are added together, durably, before the answer. Without an
authorizer Kafka fails every creation with SECURITY_DISABLED and "No Authorizer is
configured." (CreateAclsRequest.getErrorResponse).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, binding_from_creation, creation_problem

NO_AUTHORIZER = "No Authorizer is configured."


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    errors: list[tuple[ErrorCode, str | None]]
    if ctx.authorizer is None:
        errors = [(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(request.creations)
    elif not ctx.authorized_cluster(AclOperation.ALTER):
        errors = [(ErrorCode.cluster_authorization_failed, None)] * len(request.creations)
    else:
        bindings = [binding_from_creation(creation) for creation in request.creations]
        problems = [creation_problem(binding) for binding in bindings]
        valid = [b for b, p in zip(bindings, problems, strict=True) if p is None]
        await ctx.authorizer.create_acls(valid)
        errors = [
            (ErrorCode.none, None) if p is None else (ErrorCode.invalid_request, p)
            for p in problems
        ]
    results = tuple(
        make(schema.AclCreationResult, error_code=code, error_message=message)
        for code, message in errors
    )
    return make(schema.CreateAclsResponse, throttle_time=NO_THROTTLE, results=results)


API = ApiHandler(api_key=30, min_version=1, max_version=3, handle=handle, is_async=True)
