"""Kafka's ACL vocabulary: resource patterns, access control entries, bindings and the
filters CreateAcls, DescribeAcls and DeleteAcls carry (org.apache.kafka.common.acl and
.resource). The enums' values are Kafka's wire codes."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

WILDCARD = "*"  # a LITERAL resource name, or an ACL's host, matching every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=enum.IntEnum)


def _enum(kind: type[E], code: int) -> E:
    """A wire code as its enum member; codes a newer client may send read as UNKNOWN."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # "127.0.0.1", or "*"
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None for a name, principal or host matches any; ANY for the enums."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_wire(cls, request: object) -> AclBindingFilter:
        """From a DescribeAcls request or a DeleteAcls filter (their field names agree)."""
        return cls(
            _enum(ResourceType, request.resource_type_filter),  # type: ignore[attr-defined]
            request.resource_name_filter,  # type: ignore[attr-defined]
            _enum(PatternType, request.pattern_type_filter),  # type: ignore[attr-defined]
            request.principal_filter,  # type: ignore[attr-defined]
            request.host_filter,  # type: ignore[attr-defined]
            _enum(AclOperation, request.operation),  # type: ignore[attr-defined]
            _enum(AclPermissionType, request.permission_type),  # type: ignore[attr-defined]
        )

    @property
    def unknown(self) -> bool:
        return (
            self.resource_type is ResourceType.UNKNOWN
            or self.pattern_type is PatternType.UNKNOWN
            or self.operation is AclOperation.UNKNOWN
            or self.permission is AclPermissionType.UNKNOWN
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches: MATCH takes the LITERAL and PREFIXED
        patterns that would apply to the named resource (a `*` literal too)."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )


def binding_from_creation(creation: object) -> AclBinding:
    """A CreateAcls creation as a binding (unvalidated: see `creation_problem`)."""
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, creation.resource_type),  # type: ignore[attr-defined]
            creation.resource_name,  # type: ignore[attr-defined]
            _enum(PatternType, creation.resource_pattern_type),  # type: ignore[attr-defined]
        ),
        AccessControlEntry(
            creation.principal,  # type: ignore[attr-defined]
            creation.host,  # type: ignore[attr-defined]
            _enum(AclOperation, creation.operation),  # type: ignore[attr-defined]
            _enum(AclPermissionType, creation.permission_type),  # type: ignore[attr-defined]
        ),
    )


def creation_problem(binding: AclBinding) -> str | None:
    """Why Kafka (AclApis and AclControlManager.validateNewAcl) refuses to create a binding
    with INVALID_REQUEST, or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {entry.permission.name}"
    principal_type, colon, name = entry.principal.partition(":")
    if not (colon and principal_type and name):
        return f"Could not parse principal from `{entry.principal}` (no colon is present)"
    return None
