"""Kafka principals (`User:alice`) and the TLS one: the client certificate's subject in
RFC 2253 form, as Java's X500Principal.getName() writes it, mapped by
ssl.principal.mapping.rules (DefaultKafkaPrincipalBuilder)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkalite.security.ssl_principal_mapper import SslPrincipalMapper

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")

# Python's attribute names -> RFC 2253 keywords (the ones Java writes as keywords).
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# Java writes other attributes as OID=#<hex of the DER value>; emailAddress is an IA5String.
_EMAIL_OID = "1.2.840.113549.1.9.1"
_IA5_STRING_TAG = 0x16

# One RDN: (attribute, value) pairs, as ssl.SSLSocket.getpeercert()["subject"] holds them.
Rdn = Sequence[tuple[str, str]]


def _escape(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    octets = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(octets)]) + octets


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    if name == "emailAddress":
        der = bytes([_IA5_STRING_TAG]) + _der_length(len(value)) + value.encode("ascii", "replace")
        return f"{_EMAIL_OID}=#{der.hex()}"
    return f"{name}={_escape(value)}"


def rfc2253(subject: Sequence[Rdn]) -> str:
    """The distinguished name, most specific RDN first (RFC 2253 reverses the DER order)."""
    return ",".join("+".join(_attribute(n, v) for n, v in rdn) for rdn in reversed(subject))


def ssl_principal(
    peer_certificate: dict[str, object] | None, mapper: SslPrincipalMapper | None = None
) -> KafkaPrincipal:
    """`User:<name>` for a verified client certificate, its subject mapped by
    ssl.principal.mapping.rules; ANONYMOUS without one. Raises NoMatchingRule."""
    subject = (peer_certificate or {}).get("subject")
    if not subject:
        return ANONYMOUS
    name = rfc2253(subject)  # type: ignore[arg-type]
    return KafkaPrincipal(USER_TYPE, mapper.name(name) if mapper is not None else name)
