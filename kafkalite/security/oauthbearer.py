"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured-JWS validator, for development only:
tokens are `alg: none` JWTs nobody signed (OAuthBearerSaslServer with
OAuthBearerUnsecuredValidatorCallbackHandler).

The validator's options come from the listener's JAAS config
(`listener.name.<l>.oauthbearer.sasl.jaas.config`): unsecuredValidatorPrincipalClaimName
(default `sub`), unsecuredValidatorScopeClaimName (`scope`), unsecuredValidatorRequiredScope
(space-separated) and unsecuredValidatorAllowableClockSkewMs (0). `exp` is required; `iat`
may not lie in the future. An invalid token is answered, as RFC 7628 says, with a JSON error
challenge (`{"status":"invalid_token"}`); the client's `%x01` reply then fails the exchange
with that JSON as the message: the two rounds librdkafka and the Java client expect.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.security.jaas import LoginModule
from kafkalite.security.sasl_server import SaslAuthenticationError, SaslError

MECHANISM = "OAUTHBEARER"
_OPTION = "unsecuredValidator"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY, _VALUE = r"[A-Za-z]+", r"[\x21-\x7e \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_CONTROL_A = b"\x01"


@dataclass(frozen=True, slots=True)
class ValidatorOptions:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0


def validator_options(modules: list[LoginModule]) -> ValidatorOptions:
    """The unsecured validator's options of the (single) login module; ValueError if bad."""
    options: Mapping[str, str] = modules[0].options if modules else {}

    def option(name: str) -> str:
        return options.get(_OPTION + name, "").strip()

    skew = int(option("AllowableClockSkewMs") or "0")
    if skew < 0:
        raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
    return ValidatorOptions(
        option("PrincipalClaimName") or "sub",
        option("ScopeClaimName") or "scope",
        tuple(option("RequiredScope").split()),
        skew,
    )


class IllegalToken(Exception):
    """The token fails validation; `scope` is set for a missing required scope."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


def _decode_part(part: str) -> dict[str, Any]:
    try:
        padded = part + "=" * (-len(part) % 4)
        value = json.loads(base64.b64decode(padded, altchars=b"-_", validate=False))
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise IllegalToken("malformed JSON")
    return value


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise IllegalToken(f"The '{name}' claim was not of type Number: {type(value).__name__}")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> set[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return {value.strip()} if value.strip() else set()
    if isinstance(value, list):
        return {str(each).strip() for each in value if str(each).strip()}
    return set()


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str
    lifetime_ms: int  # when it expires, epoch ms (`exp`)


def validate_unsecured_jws(token: str, options: ValidatorOptions, now_ms: int) -> ValidToken:
    """A valid unsecured JWS's principal and expiry; raises IllegalToken with Kafka's reasons."""
    if ".." in token:
        raise IllegalToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise IllegalToken(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded"
            " values"
        )
    header, claims = _decode_part(parts[0]), _decode_part(parts[1])
    if header.get("alg") != "none":
        raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise IllegalToken("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, options.scope_claim)
    expiration = _number(claims, "exp")
    if expiration is None:
        raise IllegalToken("No expiration time in JWT")
    principal = claims.get(options.principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise IllegalToken(f"No principal name in JWT claim: {options.principal_claim}")
    skew = options.allowable_clock_skew_ms
    issued_at = _number(claims, "iat")
    if issued_at is not None and 1000 * issued_at > now_ms + skew:
        raise IllegalToken(
            f"The Issued At value ({issued_at:f} seconds) was after the indicated time"
        )
    if now_ms - skew >= 1000 * expiration:
        raise IllegalToken(
            f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or"
            f" after the Expiration Time value ({expiration:f} seconds)"
        )
    if issued_at is not None and expiration <= issued_at:
        raise IllegalToken("The Expiration Time time was not after the Issued At time")
    for required in options.required_scope:
        if required not in scope:
            listed = "[" + ", ".join(options.required_scope) + "]"  # Java's List.toString
            raise IllegalToken(
                f"The provided scope was missing a required scope ({required})", listed
            )
    return ValidToken(principal, round(expiration * 1000))


def _error_challenge(error: IllegalToken) -> str:
    if error.scope is None:
        return '{"status":"invalid_token"}'
    return f'{{"status":"insufficient_scope", "scope":"{error.scope}"}}'


class OAuthBearerServer:
    mechanism = MECHANISM

    def __init__(
        self, options: ValidatorOptions, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self._options = options
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._error: str | None = None  # the JSON challenge sent for an invalid token
        self._token: ValidToken | None = None

    def evaluate_response(self, response: bytes) -> bytes:
        if response == _CONTROL_A and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        match = _INITIAL_RESPONSE.fullmatch(response.decode("utf-8", "replace"))
        if match is None:
            raise SaslError("Invalid OAUTHBEARER client first message")
        pairs = dict(p.split("=", 1) for p in match.group("kvpairs").split("\x01") if p)
        auth = _AUTH.fullmatch(pairs.get("auth", ""))
        if auth is None or auth.group("scheme").lower() != "bearer":
            raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth'")
        try:
            token = validate_unsecured_jws(auth.group("token"), self._options, self._clock_ms())
        except IllegalToken as exc:
            self._error = _error_challenge(exc)
            return self._error.encode()
        authorization_id = match.group("authzid") or ""
        if authorization_id and authorization_id != token.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authorization_id})"
                f" that is different from the token's principal name ({token.principal})"
            )
        self._token = token  # extensions are all accepted, as the unsecured validator does
        return b""

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        assert self._token is not None, "authentication has not completed"
        return self._token.principal

    @property
    def credential_expiration_ms(self) -> int | None:
        return self._token.lifetime_ms if self._token is not None else None
