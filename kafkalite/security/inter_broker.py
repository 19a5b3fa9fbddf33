"""How this broker connects to the other brokers (Kafka's inter-broker channel): the
listener is config.inter_broker_listener; on SSL and SASL_SSL a client TLS context from
that listener's ssl.* properties (its truststore checks the other broker's certificate and
host name, its keystore is the certificate this broker shows when asked), on SASL_PLAINTEXT
and SASL_SSL the broker's own login, read as Kafka's brokers read it: the `username` and
`password` options of `listener.name.<listener>.<mechanism>.sasl.jaas.config` for
`sasl.mechanism.inter.broker.protocol`.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security.listener_security import jaas_modules
from kafkalite.security.sasl_client import CLIENT_MECHANISMS, SaslLogin
from kafkalite.security.ssl_context import client_ssl_context


@dataclass(frozen=True, slots=True)
class InterBrokerSecurity:
    ssl_context: ssl.SSLContext | None = None  # SSL, SASL_SSL
    login: SaslLogin | None = None  # SASL_PLAINTEXT, SASL_SSL


def inter_broker_security(config: BrokerConfig) -> InterBrokerSecurity | None:
    """None for PLAINTEXT, and on a single node (which has no other broker to talk to);
    ConfigError for what the brokers could not connect with."""
    if not config.cluster_mode:
        return None
    listener = config.inter_broker_listener
    protocol = config.protocol_map[listener]
    if protocol == "PLAINTEXT":
        return None
    context = client_ssl_context(config, listener) if protocol.endswith("SSL") else None
    login = inter_broker_login(config, listener) if protocol.startswith("SASL_") else None
    return InterBrokerSecurity(context, login)


def inter_broker_login(config: BrokerConfig, listener: str) -> SaslLogin:
    mechanism = (config.str("sasl.mechanism.inter.broker.protocol") or "").strip()
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism}: kafkalite's brokers log in to"
            f" each other with {', '.join(CLIENT_MECHANISMS)}"
        )
    enabled = (config.listener_str(listener, "sasl.enabled.mechanisms") or "").split(",")
    if mechanism not in [each.strip() for each in enabled]:
        raise ConfigError(  # Kafka's check
            f"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms"
            f" when SASL is used for inter-broker communication (listener {listener})"
        )
    for module in jaas_modules(config, listener, mechanism):
        username, password = module.options.get("username"), module.options.get("password")
        if username is not None and password is not None:
            return SaslLogin(mechanism, username, password)
    raise ConfigError(
        f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config needs the"
        " broker's own username and password for inter-broker traffic"
    )
