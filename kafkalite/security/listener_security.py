"""What a listener asks of its connections: its security protocol, TLS context and SASL
settings, resolved once from the broker config (Kafka's ChannelBuilders per listener)."""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security import oauthbearer, plain
from kafkalite.security.jaas import JaasConfigError, LoginModule, parse_jaas_config
from kafkalite.security.scram_credential import MECHANISMS as SCRAM_MECHANISMS
from kafkalite.security.ssl_context import server_ssl_context
from kafkalite.security.ssl_principal_mapper import SslPrincipalMapper

SUPPORTED_MECHANISMS = (plain.MECHANISM, *SCRAM_MECHANISMS, oauthbearer.MECHANISM)


@dataclass(frozen=True, slots=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = field(default_factory=dict)
    max_receive_size: int = 524288  # sasl.server.max.receive.size
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    max_reauth_ms: int = 0  # connections.max.reauth.ms (0: sessions do not expire)
    oauthbearer: oauthbearer.ValidatorOptions = field(default_factory=oauthbearer.ValidatorOptions)


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None
    timeout_s: float = 10.0  # kafkalite.authentication.timeout.ms
    principal_mapper: SslPrincipalMapper = field(default_factory=SslPrincipalMapper)


PLAINTEXT = ListenerSecurity("PLAINTEXT", "PLAINTEXT")


def listener_security(config: BrokerConfig, listener: str) -> ListenerSecurity:
    """Raises ConfigError for what Kafka would refuse at startup, and for what kafkalite
    cannot do (JKS stores, GSSAPI, OAUTHBEARER)."""
    protocol = config.protocol_map[listener]
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = server_ssl_context(config, listener, _client_auth(config, listener, protocol))
    sasl = _sasl_settings(config, listener) if protocol.startswith("SASL_") else None
    timeout_s = config.int("kafkalite.authentication.timeout.ms") / 1000
    rules = config.listener_str(listener, "ssl.principal.mapping.rules") or "DEFAULT"
    try:
        mapper = SslPrincipalMapper.from_rules(rules)
    except (ValueError, re.error) as exc:
        raise ConfigError(f"listener {listener}: ssl.principal.mapping.rules: {exc}") from None
    return ListenerSecurity(listener, protocol, context, sasl, timeout_s, mapper)


def _client_auth(config: BrokerConfig, listener: str, protocol: str) -> str:
    """SASL_SSL listeners authenticate clients with SASL: they ask for certificates only when
    their own `listener.name.<l>.ssl.client.auth` says so (KIP-684)."""
    if protocol == "SASL_SSL":
        own = config.raw.get(f"listener.name.{listener.lower()}.ssl.client.auth")
        return (own or "none").strip().lower()
    return (config.listener_str(listener, "ssl.client.auth") or "none").lower()


def _sasl_settings(config: BrokerConfig, listener: str) -> SaslSettings:
    enabled = config.listener_str(listener, "sasl.enabled.mechanisms") or ""
    mechanisms = tuple(filter(None, (m.strip() for m in enabled.split(","))))
    if not mechanisms:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ConfigError(
            f"listener {listener}: SASL mechanism(s) {', '.join(unsupported)} not supported"
            f" by kafkalite (sasl.enabled.mechanisms may name {', '.join(SUPPORTED_MECHANISMS)})"
        )
    users: dict[str, str] = {}
    if plain.MECHANISM in mechanisms:
        users = plain.plain_users(jaas_modules(config, listener, plain.MECHANISM))
    options = oauthbearer.ValidatorOptions()
    if oauthbearer.MECHANISM in mechanisms:
        modules = jaas_modules(config, listener, oauthbearer.MECHANISM)
        try:
            options = oauthbearer.validator_options(modules)
        except ValueError as exc:
            raise ConfigError(f"listener {listener}: OAUTHBEARER: {exc}") from None
    return SaslSettings(
        mechanisms,
        users,
        int(config.listener_str(listener, "sasl.server.max.receive.size") or "524288"),
        int(config.listener_str(listener, "connection.failed.authentication.delay.ms") or "100"),
        int(config.listener_str(listener, "connections.max.reauth.ms") or "0"),
        options,
    )


def jaas_modules(config: BrokerConfig, listener: str, mechanism: str) -> list[LoginModule]:
    """The login modules of `listener.name.<l>.<mechanism>.sasl.jaas.config` (required)."""
    name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.raw.get(name)
    if text is None:
        raise ConfigError(f"listener {listener}: SASL mechanism {mechanism} needs {name}")
    try:
        return parse_jaas_config(text)
    except JaasConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None
