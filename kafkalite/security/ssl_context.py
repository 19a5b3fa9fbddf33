"""A listener's server-side TLS context from Kafka's ssl.* properties, on Python's `ssl`.

Keystores: PEM (`ssl.keystore.location` holding key and chain, or inline `ssl.keystore.key`
and `ssl.keystore.certificate.chain`; `ssl.key.password` for an encrypted key) and PKCS12
(needs the `cryptography` package). Truststores: PEM (file or inline
`ssl.truststore.certificates`) and PKCS12. JKS, Java's own format, cannot be read: convert it
(`keytool -importkeystore -deststoretype PKCS12`)."""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from kafkalite.config import BrokerConfig, ConfigError

_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_ssl_context(config: BrokerConfig, listener: str, client_auth: str) -> ssl.SSLContext:
    """Raises ConfigError naming the listener and the property at fault."""
    context = _listener_context(config, listener, ssl.Purpose.CLIENT_AUTH, "cannot set up TLS")
    context.verify_mode = CLIENT_AUTH_MODES[client_auth]
    return context


def client_ssl_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """A broker's TLS context for connecting to the other brokers' `listener`: their
    certificate checked against the listener's truststore, with their host name (Kafka's
    default ssl.endpoint.identification.algorithm=https); its own keystore shown when a
    listener asks for client certificates."""
    return _listener_context(
        config, listener, ssl.Purpose.SERVER_AUTH, "cannot set up TLS to brokers"
    )


def _listener_context(
    config: BrokerConfig, listener: str, purpose: ssl.Purpose, failure: str
) -> ssl.SSLContext:
    """A context with `listener`'s keystore, truststore and protocols."""

    def get(name: str) -> str | None:
        return config.listener_str(listener, name)

    context = ssl.create_default_context(purpose)
    try:
        _load_keystore(context, get)
        _load_truststore(context, get)
        _set_protocols(context, get("ssl.enabled.protocols") or "")
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"listener {listener}: {failure}: {exc}") from None
    return context


def _load_keystore(context: ssl.SSLContext, get: Callable[[str], str | None]) -> None:
    kind = (get("ssl.keystore.type") or "JKS").upper()
    location, key = get("ssl.keystore.location"), get("ssl.keystore.key")
    if kind == "PEM" and key is not None:
        chain = get("ssl.keystore.certificate.chain")
        if chain is None:
            raise ValueError("ssl.keystore.key needs ssl.keystore.certificate.chain")
        _load_chain_text(context, chain + "\n" + key, get("ssl.key.password"))
    elif location is None:
        raise ValueError("a TLS listener needs ssl.keystore.location (or ssl.keystore.key)")
    elif kind == "PEM":
        context.load_cert_chain(location, password=get("ssl.key.password"))
    elif kind == "PKCS12":
        _load_chain_text(context, _pkcs12_pem(location, get("ssl.keystore.password")), None)
    else:
        raise ValueError(f"ssl.keystore.type {kind} is not supported: use PEM or PKCS12")


def _load_chain_text(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    """`load_cert_chain` reads files only: the PEM goes through a private temporary file."""
    with tempfile.TemporaryDirectory(prefix="kafkalite-tls-") as folder:
        path = Path(folder) / "keystore.pem"
        path.touch(mode=0o600)
        path.write_text(pem)
        context.load_cert_chain(path, password=password)


def _load_truststore(context: ssl.SSLContext, get: Callable[[str], str | None]) -> None:
    kind = (get("ssl.truststore.type") or "JKS").upper()
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if kind == "PEM" and inline is not None:
        context.load_verify_locations(cadata=inline)
    elif location is None:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    elif kind == "PEM":
        context.load_verify_locations(cafile=location)
    elif kind == "PKCS12":
        context.load_verify_locations(cadata=_pkcs12_pem(location, get("ssl.truststore.password")))
    else:
        raise ValueError(f"ssl.truststore.type {kind} is not supported: use PEM or PKCS12")


def _pkcs12_pem(location: str, password: str | None) -> str:
    """A PKCS12 store's key (if any) and certificates as PEM text."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:
        raise ValueError("PKCS12 stores need the 'cryptography' package") from None
    store = pkcs12.load_pkcs12(Path(location).read_bytes(), password.encode() if password else None)
    parts = []
    if store.key is not None:
        parts.append(
            store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
        )
    certificates = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    parts.extend(c.certificate.public_bytes(Encoding.PEM).decode() for c in certificates)
    return "".join(parts)


def _set_protocols(context: ssl.SSLContext, enabled: str) -> None:
    versions = []
    for name in filter(None, (p.strip() for p in enabled.split(","))):
        if name not in _TLS_VERSIONS:
            raise ValueError(f"ssl.enabled.protocols: {name} is not one of {list(_TLS_VERSIONS)}")
        versions.append(_TLS_VERSIONS[name])
    if versions:
        context.minimum_version, context.maximum_version = min(versions), max(versions)
