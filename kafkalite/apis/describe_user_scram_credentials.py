"""DescribeUserScramCredentials (key 50), version 0: each user's SCRAM mechanisms and
iterations (never salts or keys), with Kafka's per-user RESOURCE_NOT_FOUND and
DUPLICATE_RESOURCE (broker/scram_credentials.py)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.scram_credentials import UserResult
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    users = None if request.users is None else [u.name for u in request.users]
    if ctx.authorized_cluster(AclOperation.DESCRIBE):
        error, message, results = ctx.broker.scram.describe(users)
    else:
        error, message, results = _denied(users or [])
    return make(
        schema.DescribeUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        results=tuple(
            make(
                schema.DescribeUserScramCredentialsResult,
                user=result.user,
                error_code=result.error,
                error_message=result.message,
                credential_infos=tuple(
                    make(schema.CredentialInfo, mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in result.credentials
                ),
            )
            for result in results
        ),
    )


def _denied(users: list[str]) -> tuple[ErrorCode, None, list[UserResult]]:
    """DescribeUserScramCredentialsRequest.getErrorResponse: the error at the top and once
    per user asked for, each result's user name left empty (no message: ApiError drops the
    exception's default one)."""
    error = ErrorCode.cluster_authorization_failed
    return error, None, [UserResult("", error) for _ in users]


API = ApiHandler(api_key=50, min_version=0, max_version=0, handle=handle)
