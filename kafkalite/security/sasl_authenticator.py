"""Kafka's SaslServerAuthenticator as a sans-IO state machine: frames in, frames out.

A SASL listener's connection passes through it before any other request is served:

    INITIAL_REQUEST --ApiVersions--> HANDSHAKE_REQUEST --SaslHandshake--> AUTHENTICATE
          |                                                                   |
          +-------------------------SaslHandshake-----------------------------+
    AUTHENTICATE --SaslAuthenticate (v1 handshake) or raw token (v0)...--> COMPLETE
    anything else --> FAILED

(INITIAL_REQUEST becomes HANDSHAKE_OR_VERSIONS_REQUEST once a request header was read; both
serve the same requests.) Re-authentication (KIP-368) starts a new authenticator in
REAUTH_PROCESS_HANDSHAKE with the handshake an authenticated connection sent; it must keep
the mechanism (else REAUTH_BAD_MECHANISM fails the next token) and the principal.

`SERVED_IN` says which requests each state serves; the server sends what `receive` returns,
then reads `state`. On FAILED it closes the connection, after
connection.failed.authentication.delay.ms when `delay_close` (Kafka's AuthenticationException)
and at once otherwise (Kafka's other errors: a second ApiVersions, an unparsable request).
"""

from __future__ import annotations

import datetime
import enum
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.protocol.codec import (
    DecodedRequest,
    ServedApi,
    UnsupportedApiVersions,
    decode_request,
    encode_response,
)
from kafkalite.protocol.entities import make, response_module
from kafkalite.protocol.errors import FrameError
from kafkalite.security import oauthbearer, plain
from kafkalite.security.listener_security import SaslSettings
from kafkalite.security.principal import USER_TYPE, KafkaPrincipal
from kafkalite.security.sasl_server import SaslAuthenticationError, SaslError, SaslServer
from kafkalite.security.scram import CredentialLookup, ScramServer

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
# (api version, error) -> an ApiVersions response
ApiVersionsAnswer = Callable[[int, ErrorCode], Any]


class SaslState(enum.Enum):
    REAUTH_PROCESS_HANDSHAKE = enum.auto()
    REAUTH_BAD_MECHANISM = enum.auto()
    INITIAL_REQUEST = enum.auto()
    HANDSHAKE_OR_VERSIONS_REQUEST = enum.auto()
    HANDSHAKE_REQUEST = enum.auto()
    AUTHENTICATE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


# The Kafka requests each state serves; with a v0 handshake AUTHENTICATE takes raw tokens.
SERVED_IN: dict[SaslState, frozenset[int]] = {
    SaslState.REAUTH_PROCESS_HANDSHAKE: frozenset({SASL_HANDSHAKE}),
    SaslState.REAUTH_BAD_MECHANISM: frozenset({SASL_AUTHENTICATE}),
    SaslState.INITIAL_REQUEST: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    SaslState.HANDSHAKE_OR_VERSIONS_REQUEST: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    SaslState.HANDSHAKE_REQUEST: frozenset({SASL_HANDSHAKE}),
    SaslState.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
}


@dataclass(frozen=True, slots=True)
class Session:
    """An authenticated connection's session: what re-authentication must keep, and until
    when it may serve (Kafka's ReauthInfo)."""

    mechanism: str
    principal: KafkaPrincipal
    lifetime_ms: int = 0  # sent in SaslAuthenticate v1+; 0: the session does not expire
    expires_at_ms: int | None = None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms


class SaslServerAuthenticator:
    def __init__(
        self,
        settings: SaslSettings,
        served: Mapping[int, ServedApi],
        api_versions: ApiVersionsAnswer,
        scram_credentials: CredentialLookup,
        clock_ms: Callable[[], int],
        previous: Session | None = None,
    ) -> None:
        self.settings = settings
        self.previous = previous  # re-authenticating this session
        self.state = SaslState.REAUTH_PROCESS_HANDSHAKE if previous else SaslState.INITIAL_REQUEST
        self.session: Session | None = None  # once COMPLETE
        self.failure = ""  # why it failed, for the server's one log line
        self.delay_close = False
        self._clock_ms = clock_ms
        self._bad_mechanism = ""
        self._served = served
        self._api_versions = api_versions
        self._scram_credentials = scram_credentials
        self._server: SaslServer | None = None
        self._kafka_headers = False  # SaslHandshake v1+: tokens travel in SaslAuthenticate

    @property
    def mechanism(self) -> str | None:
        return self._server.mechanism if self._server is not None else None

    @property
    def principal(self) -> KafkaPrincipal | None:
        return self.session.principal if self.session is not None else None

    def receive(self, frame: bytes) -> bytes | None:
        """One frame from the client; returns the size-prefixed frame to send, if any."""
        if self.state not in SERVED_IN:
            raise RuntimeError(f"no frame is expected in state {self.state.name}")
        if self.state is SaslState.AUTHENTICATE and not self._kafka_headers:
            return self._raw_token(frame)
        if len(frame) < _HEADER.size:
            self._not_kafka_request(f"a frame of {len(frame)} bytes is no request")
            return None
        api_key, version, correlation_id = _HEADER.unpack_from(frame)
        if api_key not in self._served:
            self._not_kafka_request(f"unknown API key {api_key}")
            return None
        if self.state is SaslState.INITIAL_REQUEST:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if api_key not in SERVED_IN[self.state]:
            return self._unexpected(api_key, version, correlation_id)
        try:
            request = decode_request(frame, self._served)
        except FrameError as exc:
            self._fail(str(exc), delay=False)
            return None
        if isinstance(request, UnsupportedApiVersions):
            return _frame(
                request.correlation_id, self._api_versions(0, ErrorCode.unsupported_version)
            )
        assert isinstance(request, DecodedRequest)  # these APIs have no legacy versions
        return self._dispatch(request)

    def receive_request(self, request: DecodedRequest) -> bytes | None:
        """A request the server's reader already decoded (re-authentication happens on a
        serving connection); returns the size-prefixed frame to send, if any."""
        if self.state not in SERVED_IN:
            raise RuntimeError(f"no request is expected in state {self.state.name}")
        if request.api_key not in SERVED_IN[self.state]:
            return self._unexpected(request.api_key, request.api_version, request.correlation_id)
        return self._dispatch(request)

    def _dispatch(self, request: DecodedRequest) -> bytes | None:
        api_key, version, correlation_id = (
            request.api_key,
            request.api_version,
            request.correlation_id,
        )
        if self.state is SaslState.REAUTH_BAD_MECHANISM:
            self._fail(self._bad_mechanism)
            return None
        if api_key == API_VERSIONS:
            self.state = SaslState.HANDSHAKE_REQUEST
            return _frame(correlation_id, self._api_versions(version, ErrorCode.none))
        if api_key == SASL_HANDSHAKE:
            return self._handshake(request)
        return self._authenticate(request)

    def fail_oversized(self, size: int | None) -> None:
        """A frame above sasl.server.max.receive.size arrived (the server's frame reader)."""
        self._fail(f"Failing SASL authentication due to invalid receive size ({size})")

    def _not_kafka_request(self, why: str) -> None:
        if self.state is SaslState.INITIAL_REQUEST:  # Kafka would try GSSAPI: not served here
            self._fail(f"first SASL packet is no Kafka request ({why}) and GSSAPI is not supported")
        else:
            self._fail(why, delay=False)

    def _unexpected(self, api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key == API_VERSIONS and self.state is SaslState.HANDSHAKE_REQUEST:
            self._fail("a second ApiVersions request during SASL authentication", delay=False)
            return None
        state = self.state
        self._fail(f"Unexpected Kafka request of type {api_key} during SASL {state.name}")
        if state is SaslState.AUTHENTICATE and self._served[api_key].accepts(version):
            # Kafka answers it with ILLEGAL_SASL_STATE
            return _illegal_state_response(api_key, version, correlation_id, self._api_versions)
        return None

    def _handshake(self, request: DecodedRequest) -> bytes | None:
        mechanism = request.body.mechanism
        self._kafka_headers = request.api_version >= 1
        schema = response_module(SASL_HANDSHAKE, request.api_version)
        enabled = self.settings.mechanisms
        if mechanism not in enabled:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            error = ErrorCode.unsupported_sasl_mechanism
        elif self.previous is not None and mechanism != self.previous.mechanism:
            self.state = SaslState.REAUTH_BAD_MECHANISM  # Kafka answers the handshake first
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for"
                f" re-authentication of mechanism '{self.previous.mechanism}'"
            )
            error = ErrorCode.none
        else:
            self._server = self._create_server(mechanism)
            self.state = SaslState.AUTHENTICATE
            error = ErrorCode.none
        response = make(schema.SaslHandshakeResponse, error_code=error, mechanisms=enabled)
        return _frame(request.correlation_id, response)

    def _create_server(self, mechanism: str) -> SaslServer:
        if mechanism == plain.MECHANISM:
            return plain.PlainServer(self.settings.plain_users)
        if mechanism == oauthbearer.MECHANISM:
            return oauthbearer.OAuthBearerServer(self.settings.oauthbearer, self._clock_ms)
        return ScramServer(mechanism, self._scram_credentials)

    def _authenticate(self, request: DecodedRequest) -> bytes:
        schema = response_module(SASL_AUTHENTICATE, request.api_version)
        try:
            token = self._evaluate(request.body.auth_bytes)
        except (SaslAuthenticationError, SaslError) as exc:
            message = self._failure_message(exc)
            self._fail(f"{message} ({exc})")
            response = make(
                schema.SaslAuthenticateResponse,
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=message,
                auth_bytes=b"",
            )
            return _frame(request.correlation_id, response)
        response = make(
            schema.SaslAuthenticateResponse,
            error_code=ErrorCode.none,
            error_message=None,
            auth_bytes=token,
            session_lifetime=datetime.timedelta(
                milliseconds=self.session.lifetime_ms if self.session else 0
            ),
        )
        return _frame(request.correlation_id, response)

    def _raw_token(self, frame: bytes) -> bytes | None:
        try:
            token = self._evaluate(frame)
        except SaslAuthenticationError as exc:
            self._fail(str(exc))
            return None
        except SaslError as exc:
            self._fail(str(exc), delay=False)
            return None
        return _SIZE.pack(len(token)) + token

    def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None
        response = self._server.evaluate_response(token)
        if self._server.complete:
            principal = KafkaPrincipal(USER_TYPE, self._server.authorization_id)
            if self.previous is not None and principal != self.previous.principal:
                was = self.previous.principal
                raise SaslAuthenticationError(
                    "Cannot change principals during re-authentication from"
                    f" {was.principal_type}.{was.name}:"
                    f" {principal.principal_type}.{principal.name}"
                )
            self.session = self._new_session(self._server.mechanism, principal)
            self.state = SaslState.COMPLETE
        return response

    def _new_session(self, mechanism: str, principal: KafkaPrincipal) -> Session:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the session ends with the
        credential (an OAUTHBEARER token's `exp`) or after connections.max.reauth.ms,
        whichever comes first; neither set: it never ends."""
        now = self._clock_ms()
        ends = [self.settings.max_reauth_ms] if self.settings.max_reauth_ms > 0 else []
        assert self._server is not None
        expiration = self._server.credential_expiration_ms
        if expiration is not None:
            ends.append(expiration - now)
        if not ends:
            return Session(mechanism, principal)
        lifetime = max(0, min(ends))
        return Session(mechanism, principal, lifetime, now + lifetime)

    def _failure_message(self, exc: Exception) -> str:
        """SaslException's reason may say whether the user exists: the client gets Kafka's
        generic message instead."""
        if isinstance(exc, SaslAuthenticationError):
            return str(exc)
        during = "re-authentication" if self.previous is not None else "authentication"
        return (
            f"Authentication failed during {during} due to invalid credentials with SASL"
            f" mechanism {self.mechanism}"
        )

    def _fail(self, why: str, *, delay: bool = True) -> None:
        self.state = SaslState.FAILED
        self.failure = why
        self.delay_close = delay


def _frame(correlation_id: int, response: Any) -> bytes:
    return bytes(encode_response(correlation_id, response))


def _illegal_state_response(
    api_key: int, version: int, correlation_id: int, api_versions: ApiVersionsAnswer
) -> bytes | None:
    """The ILLEGAL_SASL_STATE answer Kafka builds for a request other than SaslAuthenticate
    after the handshake (kafkalite builds it for the pre-authentication APIs)."""
    error = ErrorCode.illegal_sasl_state
    if api_key == API_VERSIONS:
        return _frame(correlation_id, api_versions(version, error))
    if api_key == SASL_HANDSHAKE:
        schema = response_module(api_key, version)
        return _frame(correlation_id, make(schema.SaslHandshakeResponse, error_code=error))
    return None
