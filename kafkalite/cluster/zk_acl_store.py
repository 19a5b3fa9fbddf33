"""ACLs in ZooKeeper, in ZooKeeper-era Kafka's layout (kafka.zk.ZkData's ZkAclStore and
ZkAclChangeStore), so that ACLs a ZooKeeper-era Kafka wrote are read as they are.

- `/kafka-acl/<Type>/<name>` (LITERAL) and `/kafka-acl-extended/prefixed/<Type>/<name>`
  (PREFIXED) hold `{"version":1,"acls":[...]}` (security/acl_store.py encodes them);
- each change is announced by a sequential `/kafka-acl-changes/acl_changes_<seq>` holding
  `TOPIC:<name>` (LITERAL), or `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":...,"patternType":"PREFIXED"}`.

`ZkAclStore` is an AclStore: opened with a read of every ACL znode, it updates a znode by
reading it and writing it conditionally on its version, again on a conflict (Kafka's
AclAuthorizer.updateResourceAcls). `follow_acl_changes` is Kafka's
ZkNodeChangeNotificationListener for ACLs: each notification newer than the last one seen
re-reads the named znode and hands its entries to the authorizer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

import trio

from kafkalite.cluster.zk_client import (
    BadVersion,
    ConnectionLost,
    NodeExists,
    NoNode,
    SessionExpired,
    ZkClient,
    ZkWatch,
)
from kafkalite.cluster.zk_metadata import wait_any
from kafkalite.security.acl import PatternType, ResourcePattern, ResourceType
from kafkalite.security.acl_store import (
    LITERAL_ROOT,
    PREFIXED_ROOT,
    TYPE_NAMES,
    Entries,
    Update,
    decode_acls,
    encode_acls,
    znode_path,
)

log = logging.getLogger(__name__)

LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_ROOTS = (LITERAL_CHANGES, EXTENDED_CHANGES)


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the change root, the notification's data) announcing a change of `pattern`."""
    if pattern.pattern_type is PatternType.LITERAL:
        return LITERAL_CHANGES, f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_CHANGES, json.dumps(event).encode()


def _resource_type(name: str) -> ResourceType:
    """Kafka's ResourceType.fromString: the enum name or the path name, any case."""
    for kind in ResourceType:
        if name.upper() in (kind.name, kind.name.replace("_", "")):
            return kind
    raise ValueError(f"unknown resource type {name!r}")


def decode_change(root: str, data: bytes) -> ResourcePattern:
    """The resource pattern a notification names (ValueError if it names none)."""
    text = data.decode()
    if root == LITERAL_CHANGES:
        kind, colon, name = text.partition(":")
        if not colon:
            raise ValueError(f"expected ResourceType:ResourceName but got {text}")
        return ResourcePattern(_resource_type(kind), name, PatternType.LITERAL)
    event = json.loads(text)
    return ResourcePattern(
        _resource_type(event["resourceType"]),
        event["name"],
        PatternType[event["patternType"].upper()],
    )


class ZkAclStore:
    def __init__(self, zk: ZkClient, acls: dict[ResourcePattern, Entries]) -> None:
        self.zk = zk
        self._acls = acls

    @classmethod
    async def open(cls, zk: ZkClient) -> ZkAclStore:
        """Read every ACL znode (Kafka's AclAuthorizer.loadCache)."""
        acls: dict[ResourcePattern, Entries] = {}
        roots = ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED))
        for root, pattern_type in roots:
            for kind, type_name in TYPE_NAMES.items():
                try:
                    names = await zk.children(f"{root}/{type_name}")
                except NoNode:
                    continue
                for name in names:
                    pattern = ResourcePattern(kind, name, pattern_type)
                    if entries := await read_acls(zk, pattern):
                        acls[pattern] = entries
        return cls(zk, acls)

    def load(self) -> dict[ResourcePattern, Entries]:
        return dict(self._acls)

    async def update(
        self, updates: Mapping[ResourcePattern, Update]
    ) -> dict[ResourcePattern, Entries]:
        changed = {}
        for pattern, update in updates.items():
            changed[pattern] = await self._update_znode(pattern, update)
            root, data = encode_change(pattern)
            await self.zk.create(f"{root}/{CHANGE_PREFIX}", data, sequence=True, make_parents=True)
        return changed

    async def _update_znode(self, pattern: ResourcePattern, update: Update) -> Entries:
        path = znode_path(pattern)
        while True:
            try:
                data, stat = await self.zk.get(path)
                current, version = decode_acls(json.loads(data)), stat.version
            except NoNode:
                current, version = frozenset(), None
            entries = update(current)
            try:
                if version is None and entries:
                    await self.zk.create(path, _encode(entries), make_parents=True)
                elif version is not None and entries:
                    await self.zk.set(path, _encode(entries), version)
                elif version is not None:
                    await self.zk.delete(path, version)
                return entries
            except (BadVersion, NodeExists, NoNode):
                continue  # another broker changed it meanwhile: again on what it wrote


def _encode(entries: Entries) -> bytes:
    return json.dumps(encode_acls(entries)).encode()


async def read_acls(zk: ZkClient, pattern: ResourcePattern) -> Entries:
    try:
        data, _ = await zk.get(znode_path(pattern))
    except NoNode:
        return frozenset()
    return decode_acls(json.loads(data)) if data else frozenset()


def change_number(name: str) -> int:
    digits = name.removeprefix(CHANGE_PREFIX)
    return int(digits) if name.startswith(CHANGE_PREFIX) and digits.isdigit() else -1


class AclChangeListener:
    """Follows both change roots; hands each changed resource's entries to `on_change`."""

    def __init__(
        self, zk: ZkClient, on_change: Callable[[Mapping[ResourcePattern, Entries]], None]
    ) -> None:
        self.zk = zk
        self.on_change = on_change
        self.last_seen = dict.fromkeys(CHANGE_ROOTS, -1)
        self._marked = False

    async def mark_seen(self) -> None:
        """Take the notifications there are as seen: called before the store reads the ACLs
        (ZkAclStore.open), so their changes are in its cache and any later one is followed."""
        for root in CHANGE_ROOTS:
            await self.zk.ensure_path(root)
            names = await self.zk.children(root)
            self.last_seen[root] = max(map(change_number, names), default=-1)
        self._marked = True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if not self._marked:  # the authorizer read the ACLs already: changes from now on
            await self.mark_seen()
        task_status.started()
        while True:
            try:
                watches = [await self.process(root) for root in CHANGE_ROOTS]
            except (ConnectionLost, SessionExpired):
                await self.zk.wait_connected()
                continue
            await wait_any(watches)

    async def process(self, root: str) -> ZkWatch:
        """The notifications under `root` not seen yet; the watch for the next one."""
        names, watch = await self.zk.children_watch(root)
        for name in sorted((n for n in names if change_number(n) >= 0), key=change_number):
            if change_number(name) <= self.last_seen[root]:
                continue
            self.last_seen[root] = change_number(name)
            try:
                data, _ = await self.zk.get(f"{root}/{name}")
                pattern = decode_change(root, data)
            except NoNode:
                continue
            except (ValueError, KeyError) as exc:
                log.error("ignoring ACL change notification %s/%s: %s", root, name, exc)
                continue
            self.on_change({pattern: await read_acls(self.zk, pattern)})
        return watch
