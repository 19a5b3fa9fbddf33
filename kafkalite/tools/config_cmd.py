"""`kafkalite config get|set` for brokers and topics (DescribeConfigs, IncrementalAlterConfigs)."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kafkalite.tools.common import (
    Connection,
    UsageError,
    admin_client,
    connection,
    key_value,
    wait_all,
)
from kafkalite.tools.output import emit

_RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "broker": ResourceType.BROKER}


def register(commands: Any, parents: dict, parser_class: type) -> None:
    both = [parents["connection"], parents["output"]]
    config = commands.add_parser("config", help="read and change broker and topic configs")
    sub = config.add_subparsers(dest="action", required=True, parser_class=parser_class)

    get = sub.add_parser("get", parents=both, help="show configs")
    get.add_argument("resource_type", choices=sorted(_RESOURCE_TYPES), metavar="topic|broker")
    get.add_argument("name", metavar="NAME", help="topic name or broker id")
    get.add_argument("keys", nargs="*", metavar="KEY", help="only these configs")
    get.add_argument(
        "--overrides",
        action="store_true",
        help="only values set on this topic (or, for a broker, not defaults)",
    )
    get.set_defaults(run=get_configs)

    set_ = sub.add_parser("set", parents=both, help="set (KEY=VALUE) or delete (--delete KEY)")
    set_.add_argument("resource_type", choices=sorted(_RESOURCE_TYPES), metavar="topic|broker")
    set_.add_argument("name", metavar="NAME", help="topic name or broker id")
    set_.add_argument("pairs", nargs="*", type=key_value, metavar="KEY=VALUE")
    set_.add_argument("-d", "--delete", action="append", default=[], metavar="KEY")
    set_.set_defaults(run=set_configs)


def _resource(resource_type: str, name: str, **kwargs: Any) -> ConfigResource:
    if resource_type == "broker" and not name.isdigit():
        raise UsageError(f"broker id {name!r} is not a number")
    return ConfigResource(_RESOURCE_TYPES[resource_type], name, **kwargs)


def _source(entry: ConfigEntry) -> str:
    return ConfigSource(entry.source).name.lower().removesuffix("_config")


def is_override(resource_type: str, entry: dict[str, Any]) -> bool:
    """Set on this topic (not inherited from the broker), or set on this broker."""
    if resource_type == "topic":
        return entry["source"] == "dynamic_topic"
    return entry["source"] != "default"


def describe_configs(
    client: Any, conn: Connection, resource_type: str, name: str
) -> list[dict[str, Any]]:
    futures = client.describe_configs(
        [_resource(resource_type, name)], request_timeout=conn.timeout
    )
    (entries,) = wait_all(futures, conn, f"cannot describe {resource_type} config").values()
    return [
        {
            "name": entry.name,
            "value": None if entry.is_sensitive else entry.value,
            "source": _source(entry),
            "read_only": bool(entry.is_read_only),
            "sensitive": bool(entry.is_sensitive),
        }
        for entry in sorted(entries.values(), key=lambda e: e.name)
    ]


def alteration(
    resource_type: str, name: str, pairs: list[tuple[str, str]], deletions: list[str]
) -> ConfigResource:
    """One IncrementalAlterConfigs resource that sets `pairs` and deletes `deletions`."""
    if not pairs and not deletions:
        raise UsageError("nothing to change: give KEY=VALUE or --delete KEY")
    both = {key for key, _ in pairs} & set(deletions)
    if both:
        raise UsageError(f"both set and deleted: {', '.join(sorted(both))}")
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in pairs
    ] + [
        ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in deletions
    ]
    return _resource(resource_type, name, incremental_configs=entries)


def alter(client: Any, conn: Connection, resource: ConfigResource) -> dict[str, str | None]:
    """Apply an alteration; returns {key: new value, or None when deleted}."""
    futures = client.incremental_alter_configs([resource], request_timeout=conn.timeout)
    kind = resource.restype.name.lower()
    wait_all(futures, conn, f"cannot alter {kind} config")
    return {
        entry.name: None if entry.incremental_operation == AlterConfigOpType.DELETE else entry.value
        for entry in resource.incremental_configs
    }


def get_configs(args: argparse.Namespace) -> int:
    _resource(args.resource_type, args.name)  # a bad broker id is a usage error
    conn = connection(args)
    entries = describe_configs(admin_client(conn), conn, args.resource_type, args.name)
    if args.keys:
        known = {entry["name"] for entry in entries}
        missing = [key for key in args.keys if key not in known]
        if missing:
            raise UsageError(f"no such {args.resource_type} config: {', '.join(missing)}")
        entries = [entry for entry in entries if entry["name"] in args.keys]
    if args.overrides:
        entries = [entry for entry in entries if is_override(args.resource_type, entry)]
    rows = [[e["name"], e["value"], e["source"], e["read_only"]] for e in entries]
    emit(args.format, entries, [(None, ["CONFIG", "VALUE", "SOURCE", "READ-ONLY"], rows)])
    return 0


def set_configs(args: argparse.Namespace) -> int:
    resource = alteration(args.resource_type, args.name, args.pairs, args.delete)
    conn = connection(args)
    changed = alter(admin_client(conn), conn, resource)
    rows = [[key, "-" if value is None else value] for key, value in changed.items()]
    result = {args.resource_type: args.name, "changed": changed}
    emit(args.format, result, [(None, ["CONFIG", "VALUE"], rows)])
    return 0
