"""The ACL authorizer (kafkalite/security/authorizer.py): Kafka's StandardAuthorizer rules,
as examples and as properties (Hypothesis), and its file store."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.acl_file_store import FileAclStore
from kafkalite.config import ConfigError, build_config
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    creation_problem,
)
from kafkalite.security.acl_store import Update, pattern_of, znode_path
from kafkalite.security.authorizer import Authorizer, parse_super_users
from kafkalite.security.principal import KafkaPrincipal

ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"
Op, Perm, Pt, Rt = AclOperation, AclPermissionType, PatternType, ResourceType
ALLOW, DENY = Perm.ALLOW, Perm.DENY


class MemoryStore:
    def __init__(self) -> None:
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self.acls)

    async def update(
        self, updates: Mapping[ResourcePattern, Update]
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        changed = {}
        for pattern, update in updates.items():
            entries = changed[pattern] = update(self.acls.get(pattern, frozenset()))
            if entries:
                self.acls[pattern] = entries
            else:
                self.acls.pop(pattern, None)
        return changed


def acl(
    name: str,
    operation: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern_type: PatternType = Pt.LITERAL,
    resource_type: ResourceType = Rt.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def create(auth: Authorizer, bindings: list[AclBinding]) -> None:
    trio.run(auth.create_acls, bindings)


def delete(auth: Authorizer, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
    return trio.run(auth.delete_acls, filters)


def authorizer(*bindings: AclBinding, **settings: object) -> Authorizer:
    auth = Authorizer(MemoryStore(), **settings)  # type: ignore[arg-type]
    create(auth, list(bindings))
    return auth


def may(
    auth: Authorizer,
    operation: AclOperation,
    name: str = "orders",
    principal: KafkaPrincipal = ALICE,
    host: str = HOST,
    resource_type: ResourceType = Rt.TOPIC,
) -> bool:
    return auth.authorize(principal, host, operation, resource_type, name)


def test_no_acls_denies_unless_allow_everyone() -> None:
    assert not may(authorizer(), Op.READ)
    assert may(authorizer(allow_if_no_acl=True), Op.READ)


def test_acls_on_the_resource_deny_others_even_with_allow_everyone() -> None:
    auth = authorizer(acl("orders"), allow_if_no_acl=True)
    assert may(auth, Op.READ)
    assert not may(auth, Op.READ, principal=BOB)  # the resource has ACLs: none for bob
    assert may(auth, Op.READ, name="other", principal=BOB)  # no ACL there at all


def test_super_users_may_do_anything() -> None:
    auth = authorizer(acl("orders", Op.ALL, DENY, "User:*"), super_users=frozenset({"User:bob"}))
    assert may(auth, Op.DELETE, principal=BOB)
    assert not may(auth, Op.READ)
    assert parse_super_users(" User:a ;User:b;") == frozenset({"User:a", "User:b"})


@pytest.mark.parametrize(
    ("pattern", "name", "applies"),
    [
        (("orders", Pt.LITERAL), "orders", True),
        (("orders", Pt.LITERAL), "orders-eu", False),
        (("*", Pt.LITERAL), "anything", True),
        (("ord", Pt.PREFIXED), "orders", True),
        (("orders", Pt.PREFIXED), "orders", True),
        (("orders-", Pt.PREFIXED), "orders", False),
        (("*", Pt.PREFIXED), "orders", False),  # a prefix `*` is a literal character
    ],
)
def test_patterns(pattern: tuple[str, PatternType], name: str, applies: bool) -> None:
    auth = authorizer(acl(pattern[0], pattern_type=pattern[1]))
    assert may(auth, Op.READ, name=name) is applies


def test_wildcard_principal_and_hosts() -> None:
    auth = authorizer(acl("orders", principal="User:*", host=HOST))
    assert may(auth, Op.READ, principal=BOB)
    assert not may(auth, Op.READ, host="10.0.0.2")


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        (Op.READ, Op.DESCRIBE, True),
        (Op.WRITE, Op.DESCRIBE, True),
        (Op.DELETE, Op.DESCRIBE, True),
        (Op.ALTER, Op.DESCRIBE, True),
        (Op.CREATE, Op.DESCRIBE, False),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
        (Op.ALTER_CONFIGS, Op.DESCRIBE, False),
        (Op.DESCRIBE, Op.READ, False),
        (Op.ALL, Op.IDEMPOTENT_WRITE, True),
    ],
)
def test_implied_operations(granted: AclOperation, asked: AclOperation, allowed: bool) -> None:
    assert may(authorizer(acl("orders", granted)), asked) is allowed


def test_deny_wins_and_implies_nothing() -> None:
    auth = authorizer(acl("orders", Op.ALL), acl("ord", Op.WRITE, DENY, pattern_type=Pt.PREFIXED))
    assert not may(auth, Op.WRITE)
    assert may(auth, Op.READ)
    assert may(auth, Op.DESCRIBE)  # a DENY WRITE does not deny the DESCRIBE it would imply
    create(auth, [acl("*", Op.ALL, DENY, "User:*")])
    assert not may(auth, Op.READ)


def test_authorize_any_resource_of_a_type() -> None:
    assert not authorizer().authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)
    auth = authorizer(acl("logs-", Op.WRITE, pattern_type=Pt.PREFIXED))
    assert auth.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)
    assert not auth.authorize_any(BOB, HOST, Op.WRITE, Rt.TOPIC)
    create(auth, [acl("log", Op.WRITE, DENY, pattern_type=Pt.PREFIXED)])
    assert not auth.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)


def any_filter(**fields: object) -> AclBindingFilter:
    base: dict[str, object] = {
        "resource_type": Rt.ANY,
        "name": None,
        "pattern_type": Pt.ANY,
        "principal": None,
        "host": None,
        "operation": Op.ANY,
        "permission": Perm.ANY,
    }
    return AclBindingFilter(**{**base, **fields})  # type: ignore[arg-type]


def test_filters_literal_prefixed_match_any() -> None:
    literal, star = acl("orders-eu"), acl("*")
    prefixed, other = acl("orders", pattern_type=Pt.PREFIXED), acl("payments")
    auth = authorizer(literal, star, prefixed, other)
    named = {"name": "orders-eu"}
    assert auth.acls(any_filter(pattern_type=Pt.LITERAL, **named)) == [literal]
    assert auth.acls(any_filter(pattern_type=Pt.ANY, **named)) == [literal]
    assert set(auth.acls(any_filter(pattern_type=Pt.MATCH, **named))) == {
        literal,
        star,
        prefixed,
    }
    assert auth.acls(any_filter(pattern_type=Pt.PREFIXED)) == [prefixed]
    assert len(auth.acls(any_filter())) == 4
    assert auth.acls(any_filter(principal="User:bob")) == []


def test_delete_acls_per_filter() -> None:
    auth = authorizer(acl("a"), acl("a", Op.WRITE), acl("b"))
    deleted = delete(
        auth,
        [any_filter(name="a", operation=Op.WRITE), any_filter(name="b"), any_filter(name="zz")],
    )
    assert deleted == [[acl("a", Op.WRITE)], [acl("b")], []]
    assert auth.acls(any_filter()) == [acl("a")]


def test_creation_problems() -> None:
    assert creation_problem(acl("orders")) is None
    cluster = acl("other", Op.ALTER, resource_type=Rt.CLUSTER)
    assert creation_problem(cluster) == (
        "The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert creation_problem(acl("")) == "Invalid empty resource name"
    assert creation_problem(acl("t", Op.ANY)) == "Invalid operation ANY"
    assert creation_problem(acl("t", pattern_type=Pt.MATCH)) == "Invalid patternType MATCH"
    assert creation_problem(acl("t", permission=Perm.ANY)) == "Invalid permissionType ANY"
    assert creation_problem(acl("t", principal="alice")) is not None


def test_file_store_keeps_kafkas_znode_layout(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    auth = Authorizer(FileAclStore(path))
    create(auth, [acl("orders"), acl("logs-", Op.WRITE, pattern_type=Pt.PREFIXED)])
    znodes = json.loads(path.read_text())["znodes"]
    assert znodes == {
        "/kafka-acl/Topic/orders": {
            "version": 1,
            "acls": [
                {
                    "principal": "User:alice",
                    "permissionType": "Allow",
                    "operation": "Read",
                    "host": "*",
                }
            ],
        },
        "/kafka-acl-extended/prefixed/Topic/logs-": {
            "version": 1,
            "acls": [
                {
                    "principal": "User:alice",
                    "permissionType": "Allow",
                    "operation": "Write",
                    "host": "*",
                }
            ],
        },
    }
    reopened = Authorizer(FileAclStore(path))
    assert may(reopened, Op.WRITE, name="logs-1")
    delete(reopened, [any_filter(name="orders")])
    assert list(json.loads(path.read_text())["znodes"]) == [
        "/kafka-acl-extended/prefixed/Topic/logs-"
    ]


def test_znode_paths_round_trip() -> None:
    pattern = ResourcePattern(Rt.TRANSACTIONAL_ID, "tx-1", Pt.PREFIXED)
    assert znode_path(pattern) == "/kafka-acl-extended/prefixed/TransactionalId/tx-1"
    assert pattern_of(znode_path(pattern)) == pattern
    with pytest.raises(ValueError):
        pattern_of("/kafka-acl/Nope/x")


def test_authorizer_class_names() -> None:
    for name in (
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ):
        assert build_config({"authorizer.class.name": name}).str("authorizer.class.name") == name
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        build_config({"authorizer.class.name": "com.example.MyAuthorizer"})


# -- properties ------------------------------------------------------------------------------

NAMES = st.text(alphabet="ab*", min_size=1, max_size=4)
OPERATIONS = st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY)])
BINDINGS = st.builds(
    acl,
    NAMES,
    OPERATIONS,
    st.sampled_from([ALLOW, DENY]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]),
    st.sampled_from(["*", HOST, "10.0.0.2"]),
    st.sampled_from([Pt.LITERAL, Pt.PREFIXED]),
)
ASKED = st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)])


def _applies(binding: AclBinding, name: str) -> bool:
    pattern = binding.pattern
    if pattern.pattern_type is Pt.PREFIXED:
        return name.startswith(pattern.name)
    return pattern.name in (name, "*")


def _grants(binding: AclBinding, operation: AclOperation) -> bool:
    granted = binding.entry.operation
    if granted in (Op.ALL, operation):
        return True
    if binding.entry.permission is DENY:
        return False
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}}
    implied[Op.DESCRIBE_CONFIGS] = {Op.ALTER_CONFIGS}
    return granted in implied.get(operation, set())


def _reference(
    bindings: list[AclBinding], name: str, operation: AclOperation, allow_if_no_acl: bool
) -> bool:
    """The rules as Kafka's documentation states them, over the plain list."""
    applicable = [b for b in bindings if _applies(b, name)]
    if not applicable:
        return allow_if_no_acl
    mine = [
        b
        for b in applicable
        if b.entry.principal in ("User:alice", "User:*")
        and b.entry.host in ("*", HOST)
        and _grants(b, operation)
    ]
    if any(b.entry.permission is DENY for b in mine):
        return False
    return any(b.entry.permission is ALLOW for b in mine)


@settings(max_examples=50)
@given(st.lists(BINDINGS, max_size=8), NAMES.filter(lambda n: "*" not in n), ASKED, st.booleans())
def test_authorize_agrees_with_the_documented_rules(
    bindings: list[AclBinding], name: str, operation: AclOperation, allow_if_no_acl: bool
) -> None:
    auth = authorizer(*bindings, allow_if_no_acl=allow_if_no_acl)
    assert may(auth, operation, name=name) is _reference(bindings, name, operation, allow_if_no_acl)


@settings(max_examples=50)
@given(st.lists(BINDINGS, max_size=8), NAMES.filter(lambda n: "*" not in n), ASKED)
def test_adding_a_deny_never_allows_more(
    bindings: list[AclBinding], name: str, operation: AclOperation
) -> None:
    before = may(authorizer(*bindings), operation, name=name)
    after = may(authorizer(*bindings, acl(name, operation, DENY, "User:*")), operation, name=name)
    assert not after
    assert after <= before


@settings(max_examples=50)
@given(st.lists(BINDINGS, max_size=8), st.lists(BINDINGS, max_size=4))
def test_delete_then_describe(bindings: list[AclBinding], removed: list[AclBinding]) -> None:
    auth = authorizer(*bindings)
    exact = [
        any_filter(
            resource_type=b.pattern.resource_type,
            name=b.pattern.name,
            pattern_type=b.pattern.pattern_type,
            principal=b.entry.principal,
            host=b.entry.host,
            operation=b.entry.operation,
            permission=b.entry.permission,
        )
        for b in removed
    ]
    delete(auth, exact)
    assert set(auth.acls(any_filter())) == set(bindings) - set(removed)
