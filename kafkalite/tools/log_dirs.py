"""`kafkalite log-dirs`: each broker's log directories, their disk space and the size of every
partition replica in them (DescribeLogDirs, as `kafka-log-dirs.sh --describe`)."""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.tools.common import (
    Connection,
    ToolError,
    admin_client,
    check_reachable,
    connection,
)
from kafkalite.tools.output import emit


def register(commands: Any, parents: dict, parser_class: type) -> None:
    command = commands.add_parser(
        "log-dirs",
        parents=[parents["connection"], parents["output"]],
        help="log directories and partition sizes per broker (PLAINTEXT listeners)",
    )
    command.add_argument(
        "--broker", action="append", type=int, default=[], metavar="ID", help="only these brokers"
    )
    command.add_argument("--topic", action="append", default=[], help="only these topics")
    command.add_argument(
        "--internal", action="store_true", help="list internal topics (__consumer_offsets...)"
    )
    command.set_defaults(run=describe_log_dirs)


def broker_addresses(metadata: Any) -> dict[int, str]:
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def describe(conn: Connection, addresses: dict[int, str]) -> list[dict[str, Any]]:
    """One entry per broker and directory, with its partitions' sizes."""
    from kafkalite.tools.raw_requests import log_dirs  # trio and kio: only when asked

    described = []
    for broker_id, address in sorted(addresses.items()):
        for result in log_dirs(conn, address):
            partitions = [
                {"topic": t.name, "partition": p.partition_index, "size_bytes": p.partition_size}
                for t in result.topics
                for p in t.partitions
            ]
            described.append(
                {
                    "broker": broker_id,
                    "log_dir": result.log_dir,
                    "error": None if result.error_code == 0 else result.error_code.name.upper(),
                    "total_bytes": result.total_bytes,
                    "usable_bytes": result.usable_bytes,
                    "partitions": sorted(partitions, key=lambda p: (p["topic"], p["partition"])),
                }
            )
    return described


def leader_sizes(conn: Connection, metadata: Any, topics: set[str]) -> dict[tuple[str, int], int]:
    """The size of each partition of `topics` on its leader; empty on a listener the raw
    client cannot speak (TLS, SASL) rather than an error: sizes are extra detail there."""
    if conn.client.get("security.protocol", "plaintext").lower() != "plaintext":
        return {}
    leaders = {
        metadata.topics[t].partitions[p].leader
        for t in topics
        if t in metadata.topics
        for p in metadata.topics[t].partitions
    }
    addresses = {b: a for b, a in broker_addresses(metadata).items() if b in leaders}
    sizes: dict[tuple[str, int], int] = {}
    for entry in describe(conn, addresses):
        for p in entry["partitions"]:
            topic = metadata.topics.get(p["topic"])
            if p["topic"] in topics and topic.partitions[p["partition"]].leader == entry["broker"]:
                sizes[(p["topic"], p["partition"])] = p["size_bytes"]
    return sizes


def describe_log_dirs(args: argparse.Namespace) -> int:
    from kafkalite.tools.raw_requests import require_plaintext

    conn = connection(args)
    require_plaintext(conn, "log-dirs")
    metadata = check_reachable(admin_client(conn), conn)
    addresses = broker_addresses(metadata)
    if args.broker:
        unknown = sorted(set(args.broker) - set(addresses))
        if unknown:
            raise ToolError(f"no broker {', '.join(map(str, unknown))} in the cluster")
        addresses = {b: a for b, a in addresses.items() if b in args.broker}
    described = describe(conn, addresses)
    for entry in described:
        entry["partitions"] = [
            p
            for p in entry["partitions"]
            if (p["topic"] in args.topic if args.topic else args.internal or p["topic"][:2] != "__")
        ]
    tables = []
    for entry in described:
        title = (
            f"Broker {entry['broker']} {entry['log_dir']}: {entry['error'] or 'online'}, "
            f"{_bytes(entry['usable_bytes'])} free of {_bytes(entry['total_bytes'])}"
        )
        rows = [[p["topic"], p["partition"], p["size_bytes"]] for p in entry["partitions"]]
        tables.append((title, ["TOPIC", "PARTITION", "SIZE"], rows))
    emit(args.format, described, tables)
    return 0


def _bytes(count: int) -> str:
    if count < 0:
        return "?"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.4g} {unit}"
        size /= 1024
    return f"{size:.4g} TiB"
