"""DescribeAcls (key 29), versions 1-3 (Kafka 4 removed v0).

kafkalite has no authorizer yet, so it answers as Kafka's AclApis does without one:
SECURITY_DISABLED with "No Authorizer is configured on the broker" (`kafka-acls --list`
prints that error instead of failing on an unsupported API).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def handle(ctx: RequestContext, request: Any) -> Any:
    return make(
        ctx.schema.DescribeAclsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.security_disabled,
        error_message=NO_AUTHORIZER,
        resources=(),
    )


API = ApiHandler(api_key=29, min_version=1, max_version=3, handle=handle)
