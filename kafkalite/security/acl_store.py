"""Where ACLs are kept: per resource pattern, in ZooKeeper-era Kafka's layout and JSON.

Kafka's AclAuthorizer kept one znode per resource: `/kafka-acl/<Type>/<name>` for LITERAL
patterns, `/kafka-acl-extended/prefixed/<Type>/<name>` for PREFIXED ones, holding
`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}`. The single-node store keeps exactly those paths and
documents in one file in the data directory (kafkalite/broker/acl_file_store.py); a ZooKeeper store
implements the same two calls on the znodes themselves (kafkalite/cluster/zk_acl_store.py)
and hands other brokers' changes, seen through `/kafka-acl-changes` and
`/kafka-acl-extended-changes`, to Authorizer.acls_changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from kafkalite.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
VERSION = 1

# Kafka's names in znode paths and documents (ResourceType/AclOperation .toJava names).
TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
_OPERATION_NAMES: dict[AclOperation, str] = {
    op: "".join(part.capitalize() for part in op.name.split("_"))
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
_PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}


Entries = frozenset[AccessControlEntry]
Update = Callable[[Entries], Entries]  # a resource's stored entries -> its new ones


class AclStore(Protocol):
    def load(self) -> dict[ResourcePattern, Entries]:
        """Every resource pattern with ACLs, and its entries."""
        ...

    async def update(
        self, updates: Mapping[ResourcePattern, Update]
    ) -> dict[ResourcePattern, Entries]:
        """Apply each update to its resource's stored entries and store the result (none:
        the znode goes), durably: each resource's new entries. A ZooKeeper store reads the
        znode, writes it conditionally on its version (again on a conflict, as Kafka's
        AclAuthorizer.updateResourceAcls) and adds Kafka's change notification."""
        ...


def znode_path(pattern: ResourcePattern) -> str:
    root = PREFIXED_ROOT if pattern.pattern_type is PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def pattern_of(path: str) -> ResourcePattern:
    """The resource pattern a znode path names (ValueError for any other path)."""
    roots = ((PREFIXED_ROOT, PatternType.PREFIXED), (LITERAL_ROOT, PatternType.LITERAL))
    for root, pattern_type in roots:
        if path.startswith(root + "/"):
            type_name, _, name = path[len(root) + 1 :].partition("/")
            types = {v: k for k, v in TYPE_NAMES.items()}
            if type_name not in types or not name:
                break
            return ResourcePattern(types[type_name], name, pattern_type)
    raise ValueError(f"{path} is not an ACL znode")


def encode_acls(entries: frozenset[AccessControlEntry]) -> dict[str, object]:
    acls = [
        {
            "principal": entry.principal,
            "permissionType": _PERMISSION_NAMES[entry.permission],
            "operation": _OPERATION_NAMES[entry.operation],
            "host": entry.host,
        }
        for entry in sorted(entries)
    ]
    return {"version": VERSION, "acls": acls}


def decode_acls(document: Mapping[str, object]) -> frozenset[AccessControlEntry]:
    operations = {v: k for k, v in _OPERATION_NAMES.items()}
    permissions = {v: k for k, v in _PERMISSION_NAMES.items()}
    return frozenset(
        AccessControlEntry(
            acl["principal"],
            acl["host"],
            operations[acl["operation"]],
            permissions[acl["permissionType"]],
        )
        for acl in document["acls"]  # type: ignore[attr-defined]
    )
