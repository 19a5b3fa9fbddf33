"""What every API module shares: the request context and the handler record.

Each API module opens with the versions it serves and exposes `API`, an `ApiHandler`.
Handlers are plain functions of (context, request) returning the response (or None when
no response is due, as for acks=0 produce); long-polling handlers are coroutines. They
build responses with `kafkalite.protocol.entities.make`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.entities import response_module
from kafkalite.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalite.security.authorizer import Authorizer
from kafkalite.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kafkalite.broker.broker import Broker


@dataclass(slots=True)
class ChannelThrottle:
    """A connection's quota throttling (KIP-219): a handler whose client broke a quota sets
    `ms` (its answer carries it as throttle_time_ms); the server, having sent the answer,
    mutes the connection until `muted_until` (trio time): nothing more is read or served."""

    ms: int = 0
    muted_until: float = 0.0

    def throttle(self, ms: int) -> None:
        self.ms = max(self.ms, ms)


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""  # the peer's address, as Kafka reports it ("/127.0.0.1")
    listener: str = ""  # the listener the request came in on ("": the first advertised one)
    principal: KafkaPrincipal = ANONYMOUS  # who sent it (TLS certificate or SASL user)
    connection_id: str = ""  # "host:port" of the peer: unique while the connection lives
    authorizer: Authorizer | None = None  # ACLs (authorizer.class.name); None: all allowed
    request_size: int = 0  # bytes of the request frame
    channel: ChannelThrottle | None = None  # the connection's throttling (None: not muted)

    @property
    def quota_user(self) -> str:
        """Who quotas count this request against: the principal's name and the client id."""
        return self.principal.name

    @property
    def quota_client_id(self) -> str:
        return self.client_id or ""

    def throttle(self, ms: int) -> None:
        """Mute this connection for `ms` after the answer (a quota was violated)."""
        if self.channel is not None:
            self.channel.throttle(ms)

    def authorized(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        """May this request's principal, from its host, do `operation` on the resource?
        (`log_denied` False when filtering what to show rather than refusing.)"""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(
            self.principal, self._host, operation, resource_type, name, log_denied
        )

    def authorized_cluster(self, operation: AclOperation, log_denied: bool = True) -> bool:
        return self.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied)

    def authorized_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of the type (KIP-679)?"""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_any(self.principal, self._host, operation, resource_type)

    @property
    def _host(self) -> str:
        """The client's address as ACL hosts name it (Kafka's client_host is "/1.2.3.4")."""
        return self.client_host.removeprefix("/")

    @property
    def schema(self) -> ModuleType:
        """kio's response module for this API and version (its classes build the response)."""
        return response_module(self.api_key, self.api_version)


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    min_version: int  # advertised in ApiVersions
    max_version: int
    handle: Callable[[RequestContext, Any], Any]
    is_async: bool = False
    # Answers versions below `legacy_below` that kio has no schema for:
    # (version, correlation_id, frame) -> size-prefixed response frame.
    legacy: Callable[[int, int, bytes], bytes] | None = None
    legacy_below: int = 0

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
