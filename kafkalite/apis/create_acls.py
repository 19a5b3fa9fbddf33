"""CreateAcls (key 30), versions 1-3 (Kafka 4 removed v0).

Without an authorizer Kafka fails every creation with SECURITY_DISABLED and
"No Authorizer is configured." (CreateAclsRequest.getErrorResponse); kafkalite has none yet.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make

NO_AUTHORIZER = "No Authorizer is configured."


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    results = tuple(
        make(
            schema.AclCreationResult,
            error_code=ErrorCode.security_disabled,
            error_message=NO_AUTHORIZER,
        )
        for _ in request.creations
    )
    return make(schema.CreateAclsResponse, throttle_time=NO_THROTTLE, results=results)


API = ApiHandler(api_key=30, min_version=1, max_version=3, handle=handle)
