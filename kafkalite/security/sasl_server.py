"""What a SASL mechanism's server side is to the authenticator (javax.security.sasl.SaslServer
as Kafka uses it), and the two ways it fails."""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is safe to send to the client (Kafka's
    SaslAuthenticationException)."""


class SaslError(Exception):
    """Authentication failed; the client is only told that its credentials were invalid
    (Kafka's SaslException: the reason may reveal whether a user exists)."""


class SaslServer(Protocol):
    mechanism: str

    def evaluate_response(self, token: bytes) -> bytes:
        """The client's token in, the server's challenge out; raises SaslAuthenticationError
        or SaslError."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user, once complete."""
        ...

    @property
    def credential_expiration_ms(self) -> int | None:
        """When the credential expires (epoch ms), once complete; None: it does not."""
        ...
