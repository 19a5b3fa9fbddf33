"""DeleteAcls (key 31), versions 1-3 (Kafka 4 removed v0).

Without an authorizer Kafka fails every filter with SECURITY_DISABLED and
"No Authorizer is configured." and no matching ACLs (DeleteAclsRequest.getErrorResponse);
kafkalite has none yet.
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
            schema.DeleteAclsFilterResult,
            error_code=ErrorCode.security_disabled,
            error_message=NO_AUTHORIZER,
            matching_acls=(),
        )
        for _ in request.filters
    )
    return make(schema.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=results)


API = ApiHandler(api_key=31, min_version=1, max_version=3, handle=handle)
