"""The ACL authorizer, sans IO: Kafka's StandardAuthorizer (and ZooKeeper-era AclAuthorizer)
rules over ACLs kept by an AclStore (security/acl_store.py).

A request is allowed when the principal is a super user; else the ACLs that apply to the
resource are its LITERAL ones, the LITERAL `*` ones and the PREFIXED ones whose name starts
the resource's. Of those, the entries for the principal (or `User:*`) and the client's host
(or `*`) decide: a DENY for the operation (or ALL) wins; else an ALLOW for it, for ALL or
for an operation implying it (Describe from Read, Write, Delete, Alter; DescribeConfigs from
AlterConfigs) allows. With no ACL on the resource at all, allow.everyone.if.no.acl.found
decides; with ACLs but none allowing, the request is denied.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import trio

from kafkalite.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.acl_store import AclStore, Update
from kafkalite.security.principal import KafkaPrincipal

log = logging.getLogger("kafka.authorizer.logger")  # Kafka's audit logger's name

_ALL = AclOperation.ALL
_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
# An ALLOW for one of these allows the key's operation too (never a DENY: StandardAuthorizer).
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:broker`)."""
    return frozenset(filter(None, (part.strip() for part in value.split(";"))))


def _verdict(
    entry: AccessControlEntry, principals: tuple[str, str], host: str, operation: AclOperation
) -> AclPermissionType | None:
    """What one ACL entry says about the request (StandardAuthorizerData.findResult)."""
    if entry.principal not in principals or entry.host not in (WILDCARD, host):
        return None
    if entry.operation is not _ALL and entry.operation is not operation:
        implied = entry.permission is _ALLOW and entry.operation in IMPLIED_BY.get(operation, ())
        if not implied:
            return None
    return entry.permission


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str  # why, for the audit log: SuperUser, DefaultAllow/Deny, or the deciding ACL


class Authorizer:
    def __init__(
        self,
        store: AclStore,
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> None:
        self._store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # resource type -> LITERAL name -> entries; resource type -> PREFIXED name -> entries
        self._literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._lock = trio.Lock()  # one ACL change at a time (a store's update may wait)
        self._index(store.load())

    def _index(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        for pattern, entries in changes.items():
            prefixed = pattern.pattern_type is PatternType.PREFIXED
            by_type = self._prefixed if prefixed else self._literal
            names = by_type.setdefault(pattern.resource_type, {})
            if entries:
                self._acls[pattern] = names[pattern.name] = entries
            else:
                self._acls.pop(pattern, None)
                names.pop(pattern.name, None)

    # -- authorization --------------------------------------------------------------------

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        """`log_denied` False: a filter (Metadata's topic list, ListGroups), not a refusal."""
        decision = self.decide(principal, host, operation, resource_type, name)
        if not decision.allowed and log_denied:
            log.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s"
                " based on rule %s",
                principal,
                operation.name,
                host,
                resource_type.name,
                name,
                decision.rule,
            )
        return decision.allowed

    def decide(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> Decision:
        who = str(principal)
        if who in self.super_users:
            return Decision(True, "SuperUser")
        principals = (who, WILDCARD_PRINCIPAL)
        found_acl = False
        allowed_by: AccessControlEntry | None = None
        for entries in self._applicable(resource_type, name):
            found_acl = True
            for entry in entries:
                verdict = _verdict(entry, principals, host, operation)
                if verdict is _DENY:
                    return Decision(False, f"MatchingAcl({entry})")
                if verdict is _ALLOW:
                    allowed_by = entry
        if allowed_by is not None:
            return Decision(True, f"MatchingAcl({allowed_by})")
        if found_acl:
            return Decision(False, "DefaultDeny")
        default = "DefaultAllow" if self.allow_if_no_acl else "DefaultDeny"
        return Decision(self.allow_if_no_acl, default)

    def _applicable(
        self, resource_type: ResourceType, name: str
    ) -> Iterable[frozenset[AccessControlEntry]]:
        literal = self._literal.get(resource_type, {})
        if (entries := literal.get(name)) is not None:
            yield entries
        if name != WILDCARD and (entries := literal.get(WILDCARD)) is not None:
            yield entries
        for prefix, entries in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                yield entries

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do `operation` on
        some resource of the type (an ALLOW not covered by a DENY)? InitProducerId without a
        transactional id asks it for WRITE on topics (KIP-679)."""
        who = str(principal)
        if who in self.super_users:
            return True
        principals = (who, WILDCARD_PRINCIPAL)
        allowed: list[ResourcePattern] = []
        denied: list[ResourcePattern] = []
        for pattern, entries in self._acls.items():
            if pattern.resource_type is not resource_type:
                continue
            for entry in entries:
                if entry.operation is not _ALL and entry.operation is not operation:
                    continue
                if entry.principal in principals and entry.host in (WILDCARD, host):
                    (allowed if entry.permission is _ALLOW else denied).append(pattern)
        if not allowed and not denied and self.allow_if_no_acl:
            return not any(p.resource_type is resource_type for p in self._acls)
        return any(not _covered(pattern, denied) for pattern in allowed)

    # -- ACL administration (CreateAcls, DescribeAcls, DeleteAcls) --------------------------

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in sorted(self._acls.items())
            if acl_filter.matches_pattern(pattern)
            for entry in sorted(entries)
            if acl_filter.matches_entry(entry)
        ]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add validated bindings (one already present is no change), durably."""
        added: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            added.setdefault(binding.pattern, set()).add(binding.entry)
        await self._update({pattern: _adding(entries) for pattern, entries in added.items()})

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches (in this broker's view, as Kafka's
        AclAuthorizer): per filter, the bindings it removed."""
        deleted = [self.acls(acl_filter) for acl_filter in filters]
        removed: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in (b for bindings in deleted for b in bindings):
            removed.setdefault(binding.pattern, set()).add(binding.entry)
        await self._update({pattern: _removing(entries) for pattern, entries in removed.items()})
        return deleted

    async def _update(self, updates: Mapping[ResourcePattern, Update]) -> None:
        if updates:
            async with self._lock:
                self.acls_changed(await self._store.update(updates))

    def acls_changed(
        self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]
    ) -> None:
        """Take resources' new entries (none: no ACLs left): this broker's own changes, and
        the place for a shared store's notifications of other brokers' changes."""
        self._index(changes)


def _adding(entries: set[AccessControlEntry]) -> Update:
    return lambda current: current | entries


def _removing(entries: set[AccessControlEntry]) -> Update:
    return lambda current: current - entries


def _covered(pattern: ResourcePattern, denied: Sequence[ResourcePattern]) -> bool:
    """Is every resource `pattern` names denied by one of `denied`?"""
    for deny in denied:
        if deny.pattern_type is PatternType.LITERAL and deny.name == WILDCARD:
            return True
        if deny.pattern_type is PatternType.PREFIXED and pattern.name.startswith(deny.name):
            return True
        if deny == pattern:
            return True
    return False
