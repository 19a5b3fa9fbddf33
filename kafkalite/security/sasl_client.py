"""A broker's own SASL login to another broker (inter-broker traffic on a SASL_PLAINTEXT
listener), sans IO: the client side of PLAIN and SCRAM-SHA-256/512 (scramp's client, as the
server side is scramp's server), token in, token out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import scramp

from kafkalite.security import plain
from kafkalite.security.scram_credential import MECHANISMS as SCRAM_MECHANISMS

CLIENT_MECHANISMS = (plain.MECHANISM, *SCRAM_MECHANISMS)


class SaslClientError(Exception):
    """The server's answer is not what the mechanism expects (or refuses the login)."""


@dataclass(frozen=True, slots=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str = field(repr=False)

    def client(self) -> SaslClient:
        return SaslClient(self)


class SaslClient:
    """`first()` is the first token; `respond(server_token)` the next one (None: done, once
    the server's last token checked out)."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self._scram: scramp.ScramClient | None = None
        self._final_sent = False

    def first(self) -> bytes:
        if self.login.mechanism == plain.MECHANISM:
            return f"\0{self.login.username}\0{self.login.password}".encode()
        self._scram = scramp.ScramClient(
            [self.login.mechanism], self.login.username, self.login.password
        )
        return self._scram.get_client_first().encode()

    def respond(self, token: bytes) -> bytes | None:
        scram = self._scram
        if scram is None:  # PLAIN: one round
            return None
        try:
            if not self._final_sent:
                scram.set_server_first(token.decode())
                self._final_sent = True
                return scram.get_client_final().encode()
            scram.set_server_final(token.decode())  # the server proves it knows the key
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslClientError(f"SCRAM: {exc}") from exc
        return None
