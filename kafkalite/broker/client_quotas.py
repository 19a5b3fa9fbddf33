"""Client quota configs: DescribeClientQuotas and AlterClientQuotas as Kafka's controller
answers them (ClientQuotaControlManager for alterations, ClientQuotasImage.describe for the
filter), and what the quota managers enforce (broker/client_quota_manager.py).

An entity is a set of (entity type, name) pairs: `user`, `client-id`, both, or `ip`; a None
name is the type's default (`--entity-default`). A ClientQuotaStore keeps them: on a single
node its metadata file, as SCRAM credentials are; in a cluster ZooKeeper's /config/users,
/config/clients and /config/ips (cluster/zk_quota_store.py), followed by every broker. The
store hands every stored change (another broker's too) to its subscribers, the quota
managers. Without a store both APIs answer UNSUPPORTED_VERSION with NOT_STORED.

An ip entity (an address, or the default) takes connection_creation_rate only
(broker/connection_quotas.py); unlike Kafka, kafkalite takes IP addresses, not host names.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkalite.broker.controller_api import NONE, ApiError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Kafka's QuotaConfig.userAndClientQuotaConfigs and ipConfigs: key -> its type
USER_AND_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
INTEGRAL_MAX = {"LONG": (2**63 - 1, "a LONG"), "INT": (2**31 - 1, "an INT")}
NOT_STORED = "This broker has no store for client quotas"

# (entity type, name or None for the default), sorted by type: Kafka's ClientQuotaEntity
Entity = tuple[tuple[str, str | None], ...]
Ops = tuple[tuple[str, float | None], ...]  # (key, value; None: remove)


def entity_of(pairs: Sequence[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs))


def describe_entity(entity: Entity) -> str:
    """As Kafka's ClientQuotaEntity.toString names it in messages."""
    inner = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


class InvalidRequest(Exception):
    """Kafka's InvalidRequestException: the whole DescribeClientQuotas is refused."""


class UnsupportedEntityType(Exception):
    """Kafka's UnsupportedVersionException for an entity type it does not know."""


class QuotaListener(Protocol):
    def on_client_quota_changed(self, entity: Entity, quotas: Mapping[str, float]) -> None: ...


class ClientQuotaStore(Protocol):
    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]: ...

    async def alter_client_quotas(self, changes: Mapping[Entity, Ops]) -> None:
        """Apply each entity's ops to its quotas as stored now (an entity left with none
        goes), durably."""
        ...

    def subscribe(self, listener: QuotaListener) -> None:
        """Hand `listener` every entity's quotas as stored after each change."""
        ...


class SingleNodeQuotas(Protocol):
    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]: ...

    def set_client_quotas(self, changes: Mapping[Entity, Mapping[str, float]]) -> None: ...


@dataclass(slots=True)
class SingleNodeQuotaStore:
    """A single node's quotas: in its metadata file (broker/metadata_store.py)."""

    metadata: SingleNodeQuotas
    listeners: list[QuotaListener] = field(default_factory=list)

    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        return self.metadata.client_quotas()

    async def alter_client_quotas(self, changes: Mapping[Entity, Ops]) -> None:
        stored = self.metadata.client_quotas()
        new = {entity: applied(stored.get(entity, {}), ops) for entity, ops in changes.items()}
        self.metadata.set_client_quotas(new)
        for entity, quotas in new.items():
            for listener in self.listeners:
                listener.on_client_quota_changed(entity, quotas)

    def subscribe(self, listener: QuotaListener) -> None:
        self.listeners.append(listener)


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: Entity
    ops: Ops


class ClientQuotas:
    def __init__(self, store: ClientQuotaStore | None) -> None:
        self._store = store

    @property
    def stored(self) -> bool:
        return self._store is not None

    def all(self) -> Mapping[Entity, Mapping[str, float]]:
        return {} if self._store is None else self._store.client_quotas()

    def describe(
        self, components: Sequence[FilterComponent], strict: bool
    ) -> list[tuple[Entity, Mapping[str, float]]]:
        """The entities matching the filter and their quotas (ClientQuotasImage.describe);
        InvalidRequest or UnsupportedEntityType for a filter Kafka refuses."""
        exact, specified = _parse_filter(components)
        return [
            (entity, quotas)
            for entity, quotas in sorted(self.all().items(), key=lambda item: _sort_key(item[0]))
            if _matches(dict(entity), exact, specified, strict)
        ]

    async def alter(
        self, alterations: Sequence[Alteration], validate_only: bool
    ) -> list[tuple[Entity, ApiError]]:
        """Kafka's ClientQuotaControlManager.alterClientQuotas: one result per entity; an
        entity's changes apply only when all of them are valid."""
        if self._store is None:
            refused = ApiError(ErrorCode.unsupported_version, NOT_STORED)
            return [(alteration.entity, refused) for alteration in alterations]
        results: dict[Entity, ApiError] = {}
        changes: dict[Entity, Ops] = {}
        for alteration in alterations:
            entity = alteration.entity
            keys = [key for key, _ in alteration.ops]
            if entity in results or len(set(keys)) < len(keys):
                # Kafka's message for a repeated key too (its duplicate-key error is replaced)
                results[entity] = _invalid("Ignoring duplicate entity " + describe_entity(entity))
                continue
            results[entity] = error = _validate_entity(alteration)
            if error.ok:
                changes[entity] = alteration.ops
        if not validate_only and changes:
            await self._store.alter_client_quotas(changes)
        return list(results.items())


def applied(quotas: Mapping[str, float], ops: Ops) -> dict[str, float]:
    """An entity's quotas after `ops`."""
    new = dict(quotas)
    for key, value in ops:
        if value is None:
            new.pop(key, None)
        else:
            new[key] = value
    return new


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_request, message)


def _validate_entity(alteration: Alteration) -> ApiError:
    """validateEntity, configKeysForEntityType and validateQuotaKeyValue, in Kafka's order."""
    entity = alteration.entity
    if not entity:
        return _invalid("Invalid empty client quota entity")
    seen: set[str] = set()
    for kind, name in entity:
        if kind in seen:
            return _invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        seen.add(kind)
        if kind not in (USER, CLIENT_ID, IP):
            return _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            return _invalid(f"Empty {kind} not supported")
    keys = USER_AND_CLIENT_KEYS
    if IP in seen:
        if seen != {IP}:
            return _invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId"
            )
        ip = dict(entity)[IP]
        if ip is not None and normalized_ip(ip) is None:  # (Kafka also takes host names)
            return _invalid(f"{ip} is not a valid IP or resolvable host.")
        keys = IP_KEYS
    for key, value in alteration.ops:
        if value is not None and (error := _validate_value(keys, key, value)) is not None:
            return error
    return NONE


def _validate_value(keys: Mapping[str, str], key: str, value: float) -> ApiError | None:
    kind = keys.get(key)
    if kind is None:
        return _invalid(f"Invalid configuration key {key}")
    if value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if kind in INTEGRAL_MAX:
        most, name = INTEGRAL_MAX[kind]
        if value > most:
            return _invalid(f"Proposed value for {key} is too large for {name}.")
        if abs(value % 1.0) > 1e-6:
            return _invalid(f"{key} cannot be a fractional value.")
    return None


def normalized_ip(address: str) -> str | None:
    """The address in one spelling ("::1", "127.0.0.1"), or None if it is not an IP."""
    try:
        return ipaddress.ip_address(address.removeprefix("/").split("%")[0]).compressed
    except ValueError:
        return None


def _parse_filter(
    components: Sequence[FilterComponent],
) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise InvalidRequest("Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise InvalidRequest(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (IP, USER, CLIENT_ID):
            raise UnsupportedEntityType(f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise InvalidRequest(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[kind] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise InvalidRequest(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise InvalidRequest(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(kind)
        else:
            raise InvalidRequest(f"Unknown match type {component.match_type}")
    kinds = exact.keys() | specified
    if IP in kinds and (USER in kinds or CLIENT_ID in kinds):
        raise InvalidRequest(
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component."
        )
    return exact, specified


def _matches(
    entity: Mapping[str, str | None],
    exact: Mapping[str, str | None],
    specified: set[str],
    strict: bool,
) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    if any(kind not in entity or entity[kind] != name for kind, name in exact.items()):
        return False
    return all(kind in entity for kind in specified)


def _sort_key(entity: Entity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((kind, name is not None, name or "") for kind, name in entity)


def encode_entity(entity: Entity) -> list[list[str | None]]:
    """As the metadata file keeps it (JSON has no tuple keys)."""
    return [[kind, name] for kind, name in entity]


def decode_entity(raw: Sequence[Sequence[str | None]]) -> Entity:
    return entity_of([(str(kind), name) for kind, name in raw])
