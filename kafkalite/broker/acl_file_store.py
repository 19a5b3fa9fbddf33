"""A single node's ACL store: the znode documents of kafkalite/security/acl_store.py, by path,
in one JSON file in the data directory, replaced atomically on each change."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from kafkalite.security.acl import AccessControlEntry, ResourcePattern
from kafkalite.security.acl_store import (
    VERSION,
    Entries,
    Update,
    decode_acls,
    encode_acls,
    pattern_of,
    znode_path,
)
from kafkalite.storage.durable_files import write_atomically

ACLS_FILE = "acls.json"


class FileAclStore:
    """A single node's ACLs: the znode documents, by path, in one JSON file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._documents: dict[str, dict[str, object]] = {}

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        if self._path.exists():
            self._documents = json.loads(self._path.read_text(encoding="utf-8"))["znodes"]
        return {pattern_of(path): decode_acls(doc) for path, doc in self._documents.items()}

    async def update(
        self, updates: Mapping[ResourcePattern, Update]
    ) -> dict[ResourcePattern, Entries]:
        changed = {}
        for pattern, update in updates.items():
            document = self._documents.get(znode_path(pattern))
            entries = update(decode_acls(document) if document else frozenset())
            changed[pattern] = entries
            if entries:
                self._documents[znode_path(pattern)] = encode_acls(entries)
            else:
                self._documents.pop(znode_path(pattern), None)
        content = json.dumps({"version": VERSION, "znodes": self._documents}, indent=1)
        write_atomically(self._path, content)
        return changed
