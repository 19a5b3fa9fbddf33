"""AlterUserScramCredentials (key 51), version 0: upsert or delete users' SCRAM credentials,
with Kafka's per-user UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE
and RESOURCE_NOT_FOUND (broker/scram_credentials.py). The client sends the salted password;
the broker keeps the stored and server keys derived from it."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.scram_credentials import Deletion, Upsertion, UserResult
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation


async def handle(ctx: RequestContext, request: Any) -> Any:
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [
        Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
        for u in request.upsertions
    ]
    if ctx.authorized_cluster(AclOperation.ALTER):
        results = await ctx.broker.scram.alter(deletions, upsertions)
    else:  # every user named, refused (Kafka's getErrorResponse)
        users = dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions])
        results = [UserResult(user, ErrorCode.cluster_authorization_failed) for user in users]
    return make(
        ctx.schema.AlterUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(
                ctx.schema.AlterUserScramCredentialsResult,
                user=result.user,
                error_code=result.error,
                error_message=result.message,
            )
            for result in results
        ),
    )


API = ApiHandler(api_key=51, min_version=0, max_version=0, handle=handle, is_async=True)
