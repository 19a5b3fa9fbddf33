"""SASL/SCRAM-SHA-256 and -512 (RFC 5802/7677) as Kafka's ScramSaslServer, with `scramp`
doing the exchange and the proof check. Credentials come from the broker's store
(`lookup(user, mechanism)`); delegation tokens (`tokenauth`) are not supported, so a token
id is an unknown user."""

from __future__ import annotations

from collections.abc import Callable

import scramp

from kafkalite.security.sasl_server import SaslAuthenticationError, SaslError
from kafkalite.security.scram_credential import MECHANISMS, ScramCredential

CredentialLookup = Callable[[str, str], ScramCredential | None]


def _saslname(text: str) -> str:
    return text.replace("=2C", ",").replace("=3D", "=")


def _names(client_first: str) -> tuple[str, str]:
    """(authzid, username) of a client-first message: the gs2 header's `a=` ("" when absent)
    and the bare message's `n=`."""
    parts = client_first.split(",", 3)
    if len(parts) < 3:
        return "", ""
    authzid = _saslname(parts[1][2:]) if parts[1].startswith("a=") else ""
    username = _saslname(parts[2][2:]) if parts[2].startswith("n=") else ""
    return authzid, username


class ScramServer:
    credential_expiration_ms = None  # no delegation tokens: credentials do not expire

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._scram = MECHANISMS[mechanism]
        self._lookup = lookup
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._username: str | None = None
        self._complete = False

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            return None
        if credential.iterations < self._scram.min_iterations:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum")
        self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate_response(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
            if self._username is None:
                return self._client_first(message)
            self._accept_nonce_ending_with_ours(message)
            self._server.set_client_final(message)
            final = self._server.get_server_final()
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslError(f"Authentication failed: {exc}") from None
        self._complete = True
        return final.encode()

    def _accept_nonce_ending_with_ours(self, client_final: str) -> None:
        """Kafka checks only that the client-final nonce ends with the server-first one
        (librdkafka 2.0.x, Debian's kcat, sends its own nonce again before it); scramp wants
        them equal, so it is told to expect the one sent. The proof, over the messages as
        sent, still decides."""
        fields = dict(part.split("=", 1) for part in client_final.split(",") if "=" in part)
        sent, expected = fields.get("r", ""), str(self._server.nonce)
        if sent != expected and sent.endswith(expected):
            self._server.nonce = type(self._server.nonce)(sent)

    def _client_first(self, message: str) -> bytes:
        authorization_id, username = _names(message)
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different"
                " from username"
            )
        # scramp refuses any authzid, even the user's own (Kafka accepts that one; neither
        # librdkafka nor the Java client sends one)
        self._server.set_client_first(message)
        if self._username is None:  # scramp did not ask: nothing to authenticate against
            raise SaslError("Authentication failed: Invalid user credentials")
        return self._server.get_server_first().encode()

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        assert self._complete and self._username is not None, "authentication incomplete"
        return self._username
