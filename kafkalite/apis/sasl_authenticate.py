"""SaslAuthenticate (key 36), versions 0-2.

Served by the SASL authenticator during authentication (security/sasl_authenticator.py); one
reaching this handler came after authentication or on a listener without SASL, and is
answered ILLEGAL_SASL_STATE with Kafka's message.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import make


def handle(ctx: RequestContext, request: Any) -> Any:
    return make(
        ctx.schema.SaslAuthenticateResponse,
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


API = ApiHandler(api_key=36, min_version=0, max_version=2, handle=handle)
