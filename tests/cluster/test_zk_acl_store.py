"""ACLs in ZooKeeper (kafkalite/cluster/zk_acl_store.py) against a real ZooKeeper: ACLs a
ZooKeeper-era Kafka wrote (its znodes, by hand here) are read as they are; one authorizer's
changes land in Kafka's znodes with Kafka's change notifications, and another authorizer
following them applies them."""

from __future__ import annotations

import json

import trio

from kafkalite.cluster.zk_acl_store import AclChangeListener, ZkAclStore
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.authorizer import Authorizer
from kafkalite.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
HOST = "10.0.0.1"
KAFKA_WRITTEN = {  # as Kafka 3.x's AclAuthorizer writes them
    "/kafka-acl/Topic/orders": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ],
    "/kafka-acl-extended/prefixed/Group/alice-": [
        {"principal": "User:*", "permissionType": "Allow", "operation": "All", "host": "*"}
    ],
}


def may(authorizer: Authorizer, operation: AclOperation, kind: ResourceType, name: str) -> bool:
    return authorizer.authorize(ALICE, HOST, operation, kind, name)


async def until(condition: object, what: str) -> None:
    with trio.fail_after(10):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.05)


def test_acls_in_kafkas_znodes(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk_a, ZkClient.open(zk_connect) as zk_b:
            for path, acls in KAFKA_WRITTEN.items():
                document = json.dumps({"version": 1, "acls": acls}).encode()
                await zk_a.create(path, document, make_parents=True)
            broker_a = Authorizer(await ZkAclStore.open(zk_a))
            broker_b = Authorizer(await ZkAclStore.open(zk_b))
            assert may(broker_a, AclOperation.READ, ResourceType.TOPIC, "orders")
            assert may(broker_b, AclOperation.DELETE, ResourceType.GROUP, "alice-1")
            assert not may(broker_b, AclOperation.WRITE, ResourceType.TOPIC, "orders")

            async with trio.open_nursery() as nursery:
                await nursery.start(AclChangeListener(zk_b, broker_b.acls_changed).run)
                write = AclBinding(
                    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                    AccessControlEntry(
                        "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW
                    ),
                )
                await broker_a.create_acls([write])
                await until(
                    lambda: may(broker_b, AclOperation.WRITE, ResourceType.TOPIC, "orders"),
                    "broker b sees the new ACL",
                )
                data, _ = await zk_a.get("/kafka-acl/Topic/orders")
                assert sorted(acl["operation"] for acl in json.loads(data)["acls"]) == [
                    "Read",
                    "Write",
                ]
                (literal,) = await zk_a.children("/kafka-acl-changes")
                assert literal.startswith("acl_changes_")
                assert (await zk_a.get(f"/kafka-acl-changes/{literal}"))[0] == b"TOPIC:orders"

                every_group_acl = AclBindingFilter(
                    ResourceType.GROUP,
                    None,
                    PatternType.ANY,
                    None,
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
                (deleted,) = await broker_a.delete_acls([every_group_acl])
                assert [b.pattern.name for b in deleted] == ["alice-"]
                await until(
                    lambda: not may(broker_b, AclOperation.READ, ResourceType.GROUP, "alice-1"),
                    "broker b sees the deletion",
                )
                assert await zk_a.exists("/kafka-acl-extended/prefixed/Group/alice-") is None
                (extended,) = await zk_a.children("/kafka-acl-extended-changes")
                event = json.loads((await zk_a.get(f"/kafka-acl-extended-changes/{extended}"))[0])
                assert event == {
                    "version": 1,
                    "resourceType": "GROUP",
                    "name": "alice-",
                    "patternType": "PREFIXED",
                }
                nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_change_while_a_broker_starts_is_followed(zk_connect: str) -> None:
    """A broker marks the notifications seen before it reads the ACLs (member._zk_authorizer):
    an ACL created after the read but before the listener runs still reaches it."""

    async def main() -> None:
        async with ZkClient.open(zk_connect) as zk_a, ZkClient.open(zk_connect) as zk_b:
            broker_a = Authorizer(await ZkAclStore.open(zk_a))
            listener = AclChangeListener(zk_b, lambda _: None)
            await listener.mark_seen()
            broker_b = Authorizer(await ZkAclStore.open(zk_b))
            listener.on_change = broker_b.acls_changed
            read = AclBinding(
                ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
            await broker_a.create_acls([read])  # after b's read, before its listener runs
            async with trio.open_nursery() as nursery:
                await nursery.start(listener.run)
                await until(
                    lambda: may(broker_b, AclOperation.READ, ResourceType.TOPIC, "orders"),
                    "broker b sees the ACL created while it started",
                )
                nursery.cancel_scope.cancel()

    trio.run(main)
