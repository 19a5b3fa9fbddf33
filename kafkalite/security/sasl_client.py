"""A broker's own SASL login to another broker (inter-broker traffic on a SASL_PLAINTEXT
listener), sans IO: the client side of PLAIN and SCRAM-SHA-256/512 (scramp's client, as the
server side is scramp's server), token in, token out.

`inter_broker_login` reads the broker's credentials as Kafka's brokers do: the `username`
and `password` options of `listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config`
for `sasl.mechanism.inter.broker.protocol`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import scramp

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security import plain
from kafkalite.security.listener_security import jaas_modules
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


def inter_broker_login(config: BrokerConfig) -> SaslLogin | None:
    """The broker's login on the inter-broker listener; None when it is not a SASL one, or
    on a single node (which has no other broker to talk to)."""
    listener = config.inter_broker_listener
    if not config.cluster_mode or not config.protocol_map[listener].startswith("SASL_"):
        return None
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
