"""SaslHandshake (key 17), versions 0-1.

On a SASL listener the handshake is served by the SASL authenticator before any other request
(security/sasl_authenticator.py), and one that renews a session by the re-authentication
(security/reauthentication.py). What reaches this handler came on a listener without SASL,
or on a session that has no end or was renewed less than a second ago: Kafka's KafkaApis
answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import make


def handle(ctx: RequestContext, request: Any) -> Any:
    return make(
        ctx.schema.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=()
    )


API = ApiHandler(api_key=17, min_version=0, max_version=1, handle=handle)
