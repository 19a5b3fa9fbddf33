"""Re-authentication of a serving SASL connection (KIP-368), sans-IO.

A session with an end (connections.max.reauth.ms, or an OAUTHBEARER token's `exp`) may be
renewed: a SaslHandshake on the authenticated connection starts a new authenticator for the
same mechanism and principal, and the SaslAuthenticate requests that follow go to it, not to
the API handlers. At most one re-authentication a second (Kafka's
MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS); otherwise, and without a session end, the handshake
goes on to the handler, which answers ILLEGAL_SASL_STATE. A request after the session ended
closes the connection (SocketServer's expired-channel check).
"""

from __future__ import annotations

from collections.abc import Callable

from kafkalite.protocol.codec import DecodedRequest
from kafkalite.security.sasl_authenticator import (
    SASL_HANDSHAKE,
    SaslServerAuthenticator,
    SaslState,
    Session,
)

MIN_INTERVAL_MS = 1000


class Reauthentication:
    def __init__(
        self,
        session: Session,
        new_authenticator: Callable[[Session], SaslServerAuthenticator],
        clock_ms: Callable[[], int],
    ) -> None:
        self.session = session
        self._new_authenticator = new_authenticator
        self._clock_ms = clock_ms
        self._authenticator: SaslServerAuthenticator | None = None
        self._last_start_ms: int | None = None
        self.renewals = 0  # completed re-authentications

    @property
    def expired(self) -> bool:
        return self._authenticator is None and self.session.expired(self._clock_ms())

    def takes(self, request: DecodedRequest) -> bool:
        """Whether `request` belongs to a re-authentication (starting one if it may)."""
        if self._authenticator is not None:
            return True
        now = self._clock_ms()
        if (
            request.api_key != SASL_HANDSHAKE
            or self.session.expires_at_ms is None
            or (self._last_start_ms is not None and now - self._last_start_ms < MIN_INTERVAL_MS)
        ):
            return False
        self._last_start_ms = now
        self._authenticator = self._new_authenticator(self.session)
        return True

    def receive(self, request: DecodedRequest) -> bytes | None:
        """The response frame to send, if any; then `failed` says whether to close."""
        assert self._authenticator is not None
        response = self._authenticator.receive_request(request)
        if self._authenticator.session is not None:  # complete: the renewed session serves
            self.session = self._authenticator.session
            self._authenticator = None
            self.renewals += 1
        return response

    @property
    def failed(self) -> SaslServerAuthenticator | None:
        """The failed authenticator (its `failure` and `delay_close`), if it failed."""
        authenticator = self._authenticator
        return authenticator if authenticator and authenticator.state is SaslState.FAILED else None
