"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer, against the users of the listener's
JAAS config (`user_<name>="<password>"`, PlainServerCallbackHandler)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kafkalite.security.jaas import LoginModule
from kafkalite.security.sasl_server import SaslAuthenticationError

MECHANISM = "PLAIN"
LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"


def plain_users(modules: list[LoginModule]) -> dict[str, str]:
    """user -> password from the `user_<name>` options of the JAAS config's login modules."""
    return {
        option[len(_USER_PREFIX) :]: password
        for module in modules
        for option, password in module.options.items()
        if option.startswith(_USER_PREFIX)
    }


class PlainServer:
    mechanism = MECHANISM
    credential_expiration_ms = None  # passwords do not expire

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    def evaluate_response(self, token: bytes) -> bytes:
        # message = [authzid] NUL authcid NUL passwd
        tokens = token.decode("utf-8", "replace").split("\0")
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compared in constant time, and as long for unknown users (Utils.isEqualConstantTime)
        if not hmac.compare_digest((expected or "").encode(), password.encode()) or not expected:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different"
                " from username"
            )
        self._authorization_id = username
        return b""

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        assert self._authorization_id is not None, "authentication has not completed"
        return self._authorization_id
