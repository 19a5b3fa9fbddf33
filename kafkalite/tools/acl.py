"""`kafkalite acl add|list|remove` (CreateAcls, DescribeAcls, DeleteAcls), with kafka-acls.sh's
options: principals to allow or deny, operations by Kafka's names, the resources they apply to."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from kafkalite.tools.common import UsageError, admin_client, connection, wait_each, wait_named
from kafkalite.tools.output import emit

CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka names it
# Kafka's operation names (kafka-acls.sh --operation), each as confluent-kafka's enum.
OPERATIONS = {
    "".join(part.capitalize() for part in op.name.split("_")): op
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
_RESOURCE_OPTIONS = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
}
_RESOURCE_NAMES = {ResourceType.BROKER: "CLUSTER"}  # confluent-kafka's name for Kafka's CLUSTER
_ADD_PATTERNS = ("literal", "prefixed")
_FILTER_PATTERNS = ("literal", "prefixed", "match", "any")
HEADERS = ["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE", "NAME", "PATTERN"]


def register(commands: Any, parents: dict, parser_class: type) -> None:
    both = [parents["connection"], parents["output"]]
    acl = commands.add_parser("acl", help="add, list and remove ACLs")
    sub = acl.add_subparsers(dest="action", required=True, parser_class=parser_class)

    add = sub.add_parser("add", parents=both, help="allow or deny principals operations")
    _principal_options(add)
    _operation_option(add, required=True)
    _resource_options(add, _ADD_PATTERNS)
    add.set_defaults(run=add_acls)

    list_ = sub.add_parser("list", parents=both, help="show ACLs (all, or those matching)")
    list_.add_argument(
        "--principal", type=principal, metavar="TYPE:NAME", help="only this principal's ACLs"
    )
    _operation_option(list_, required=False)
    _resource_options(list_, _FILTER_PATTERNS)
    list_.set_defaults(run=list_acls)

    remove = sub.add_parser("remove", parents=both, help="remove the ACLs matching")
    _principal_options(remove)
    _operation_option(remove, required=False)
    _resource_options(remove, _FILTER_PATTERNS)
    remove.set_defaults(run=remove_acls)


def _principal_options(parser: argparse.ArgumentParser) -> None:
    for permission in ("allow", "deny"):
        parser.add_argument(
            f"--{permission}-principal",
            action="append",
            default=[],
            type=principal,
            metavar="TYPE:NAME",
            help=f"{permission} this principal (repeatable), e.g. User:alice or User:*",
        )


def _operation_option(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        required=required,
        type=operation,
        metavar="OPERATION",
        help=f"repeatable; one of {', '.join(OPERATIONS)}",
    )


def _resource_options(parser: argparse.ArgumentParser, patterns: tuple[str, ...]) -> None:
    for option in _RESOURCE_OPTIONS:
        flag = option.replace("_", "-")
        parser.add_argument(
            f"--{flag}", action="append", default=[], metavar="NAME", help=f"repeatable {flag}"
        )
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type", choices=patterns, default="literal", help="(default: literal)"
    )
    parser.add_argument(
        "--host", help="the client host (add: default *, every host; list, remove: any host)"
    )


def principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not a principal TYPE:NAME, e.g. User:alice")
    return text


def operation(text: str) -> AclOperation:
    wanted = text.replace("_", "").replace("-", "").lower()
    for name, op in OPERATIONS.items():
        if name.lower() == wanted:
            return op
    raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(OPERATIONS)}")


def operation_name(op: AclOperation) -> str:
    return next((name for name, known in OPERATIONS.items() if known == op), op.name)


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    """The (type, name) of every resource the options name."""
    named = [
        (kind, name) for option, kind in _RESOURCE_OPTIONS.items() for name in getattr(args, option)
    ]
    if any(not name for _, name in named):
        raise UsageError("a resource name must not be empty")
    return named + ([(ResourceType.BROKER, CLUSTER_NAME)] if args.cluster else [])


def grants(args: argparse.Namespace) -> list[tuple[str, AclPermissionType]]:
    return [(p, AclPermissionType.ALLOW) for p in args.allow_principal] + [
        (p, AclPermissionType.DENY) for p in args.deny_principal
    ]


def _pattern(args: argparse.Namespace) -> ResourcePatternType:
    return ResourcePatternType[args.resource_pattern_type.upper()]


def _add_pattern(args: argparse.Namespace, kind: ResourceType) -> ResourcePatternType:
    """The cluster has one name: its ACLs are LITERAL whatever --resource-pattern-type says."""
    return ResourcePatternType.LITERAL if kind == ResourceType.BROKER else _pattern(args)


def bindings(args: argparse.Namespace) -> list[AclBinding]:
    """`acl add`: every principal x operation x resource."""
    named, granted = resources(args), grants(args)
    if not granted:
        raise UsageError("give --allow-principal or --deny-principal")
    if not named:
        raise UsageError("give a resource: --topic, --group, --transactional-id or --cluster")
    return [
        AclBinding(kind, name, _add_pattern(args, kind), who, args.host or "*", op, permission)
        for kind, name in named
        for who, permission in granted
        for op in dict.fromkeys(args.operation)
    ]


def filters(
    args: argparse.Namespace, granted: list[tuple[str | None, AclPermissionType]]
) -> list[AclBindingFilter]:
    """`acl list|remove`: a filter per resource x principal x operation (ANY where not given)."""
    named: list[tuple[ResourceType, str | None]] = list(resources(args))
    pattern = _pattern(args)
    if not named:
        if args.action == "remove":  # as kafka-acls.sh: never every ACL by accident
            raise UsageError("give a resource: --topic, --group, --transactional-id or --cluster")
        named = [(ResourceType.ANY, None)]
        if pattern == ResourcePatternType.LITERAL:  # the default: every ACL of any pattern
            pattern = ResourcePatternType.ANY
    return [
        AclBindingFilter(kind, name, pattern, who, args.host, op, permission)
        for kind, name in named
        for who, permission in granted
        for op in dict.fromkeys(args.operation or [AclOperation.ANY])
    ]


def as_dict(binding: AclBinding) -> dict[str, Any]:
    return {
        "principal": binding.principal,
        "host": binding.host,
        "operation": operation_name(binding.operation),
        "permission": binding.permission_type.name,
        "resource_type": _RESOURCE_NAMES.get(binding.restype, binding.restype.name),
        "name": binding.name,
        "pattern_type": binding.resource_pattern_type.name,
    }


def _emit(args: argparse.Namespace, found: list[AclBinding]) -> None:
    acls = sorted((as_dict(b) for b in found), key=lambda a: tuple(a.values()))
    unique = list({tuple(a.values()): a for a in acls}.values())
    rows = [list(a.values()) for a in unique]
    emit(args.format, unique, [(None, HEADERS, rows)])


def add_acls(args: argparse.Namespace) -> int:
    wanted = bindings(args)
    conn = connection(args)
    client = admin_client(conn)
    wait_each(client.create_acls(wanted, request_timeout=conn.timeout), conn, "cannot add ACLs")
    _emit(args, wanted)
    return 0


def list_acls(args: argparse.Namespace) -> int:
    every = filters(args, [(args.principal, AclPermissionType.ANY)])
    conn = connection(args)
    client = admin_client(conn)
    found: list[AclBinding] = []
    for acl_filter in every:
        future = client.describe_acls(acl_filter, request_timeout=conn.timeout)
        found.extend(wait_named(future, conn, "cannot list ACLs"))
    _emit(args, found)
    return 0


def remove_acls(args: argparse.Namespace) -> int:
    granted: list[tuple[str | None, AclPermissionType]] = list(grants(args)) or [
        (None, AclPermissionType.ANY)
    ]
    wanted = filters(args, granted)
    conn = connection(args)
    client = admin_client(conn)
    futures = client.delete_acls(wanted, request_timeout=conn.timeout)
    removed = wait_each(futures, conn, "cannot remove ACLs")
    _emit(args, [binding for bindings_ in removed for binding in bindings_])
    return 0
