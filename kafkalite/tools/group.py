"""`kafkalite group list|describe|reset-offsets|delete-offsets|delete`, with lag per partition
and in total."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafkalite.tools.common import (
    Connection,
    ToolError,
    UsageError,
    admin_client,
    check_reachable,
    connection,
    group_type,
    timestamp_ms,
    topic_metadata,
    wait,
    wait_all,
)
from kafkalite.tools.output import emit

_INACTIVE = {"EMPTY", "DEAD"}


def register(commands: Any, parents: dict, parser_class: type) -> None:
    both = [parents["connection"], parents["output"]]
    group = commands.add_parser(
        "group", help="consumer groups: list, describe (lag), reset, delete"
    )
    sub = group.add_subparsers(dest="action", required=True, parser_class=parser_class)

    sub.add_parser("list", parents=both, help="list groups").set_defaults(run=list_groups)

    describe = sub.add_parser("describe", parents=both, help="members, offsets and lag")
    describe.add_argument("groups", nargs="+", metavar="GROUP")
    describe.set_defaults(run=describe_groups)

    reset = sub.add_parser(
        "reset-offsets", parents=both, help="move committed offsets (dry run without --execute)"
    )
    reset.add_argument("group", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic", action="append", type=_topic_scope, metavar="TOPIC[:P,P...]", default=None
    )
    scope.add_argument("--all-topics", action="store_true", help="every topic with commits")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=_non_negative, metavar="OFFSET")
    to.add_argument("--to-datetime", type=timestamp_ms, metavar="ISO|EPOCH-MS")
    to.add_argument("--shift-by", type=int, metavar="N")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(run=reset_offsets)

    delete_offsets = sub.add_parser(
        "delete-offsets",
        parents=both,
        help="delete committed offsets (OffsetDelete; PLAINTEXT listeners)",
    )
    delete_offsets.add_argument("group", metavar="GROUP")
    delete_offsets.add_argument(
        "--topic", action="append", type=_topic_scope, metavar="TOPIC[:P,P...]", required=True
    )
    delete_offsets.set_defaults(run=delete_group_offsets)

    delete = sub.add_parser("delete", parents=both, help="delete groups")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(run=delete_groups)


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an offset (a non-negative integer)")
    return int(text)


def _topic_scope(text: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"{text!r} names no topic")
    if not sep:
        return topic, None
    try:
        partitions = [int(p) for p in parts.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: partitions must be integers") from None
    if any(p < 0 for p in partitions):
        raise argparse.ArgumentTypeError(f"{text!r}: partitions must not be negative")
    return topic, partitions


def list_groups(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    result = wait(
        client.list_consumer_groups(request_timeout=conn.timeout), conn, "cannot list groups"
    )
    listed = {
        g.group_id: {
            "group": g.group_id,
            "state": _state(g.state),
            "type": group_type(g.type),
            "protocol_type": "consumer" if not g.is_simple_consumer_group else "simple",
        }
        for g in result.valid
    }
    for share_group in _share_groups(client, conn):
        listed[share_group["group"]] = {**share_group, "protocol_type": "share"}
    groups = [listed[name] for name in sorted(listed)]
    rows = [[g["group"], g["type"], g["state"]] for g in groups]
    emit(args.format, groups, [(None, ["GROUP", "TYPE", "STATE"], rows)])
    return 0


def _plaintext(conn: Connection) -> bool:
    return conn.client.get("security.protocol", "plaintext").lower() == "plaintext"


def _share_groups(client: Any, conn: Connection) -> list[dict[str, str]]:
    """Share groups, asked of every broker (PLAINTEXT only: tools/share_groups.py)."""
    if not _plaintext(conn):
        return []
    from kafkalite.tools.share_groups import list_share_groups  # trio, kio

    brokers = check_reachable(client, conn).brokers.values()
    return list_share_groups(conn, [f"{b.host}:{b.port}" for b in brokers])


def _state(state: Any) -> str:
    return state.name if state is not None else "UNKNOWN"


def _committed(client: Any, conn: Connection, group: str) -> dict[tuple[str, int], int]:
    request = [ConsumerGroupTopicPartitions(group)]
    futures = client.list_consumer_group_offsets(request, request_timeout=conn.timeout)
    (result,) = wait_all(futures, conn, "cannot fetch offsets of group").values()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _offsets(
    client: Any, conn: Connection, partitions: list[tuple[str, int]], spec: OffsetSpec
) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    request = {TopicPartition(t, p): spec for t, p in partitions}
    futures = client.list_offsets(request, request_timeout=conn.timeout)
    results = wait_all(futures, conn, "cannot list offsets of")
    return {(tp.topic, tp.partition): info.offset for tp, info in results.items()}


@dataclass
class _Described:
    group: str
    state: str
    coordinator: int | None
    assignor: str
    members: list[dict[str, Any]]
    offsets: list[dict[str, Any]]

    @property
    def total_lag(self) -> int:
        return sum(row["lag"] or 0 for row in self.offsets)

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "state": self.state,
            "coordinator": self.coordinator,
            "assignor": self.assignor,
            "members": self.members,
            "offsets": self.offsets,
            "total_lag": self.total_lag,
        }


def describe_group(client: Any, conn: Connection, group: str) -> _Described:
    futures = client.describe_consumer_groups([group], request_timeout=conn.timeout)
    (description,) = wait_all(futures, conn, "cannot describe group").values()
    committed = _committed(client, conn, group)
    state = _state(description.state)
    if state == "DEAD" and not committed:
        raise ToolError(f"group {group} does not exist")
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    members = []
    for member in description.members:
        assigned = [(tp.topic, tp.partition) for tp in member.assignment.topic_partitions]
        info = {
            "member_id": member.member_id,
            "client_id": member.client_id,
            "host": member.host,
            "assignment": [{"topic": t, "partition": p} for t, p in sorted(assigned)],
        }
        members.append(info)
        owner.update(dict.fromkeys(assigned, info))
    partitions = sorted(set(committed) | set(owner))
    ends = _offsets(client, conn, partitions, OffsetSpec.latest())
    offsets = []
    for topic, partition in partitions:
        current = committed.get((topic, partition))
        end = ends[(topic, partition)]
        member = owner.get((topic, partition))
        offsets.append(
            {
                "topic": topic,
                "partition": partition,
                "committed_offset": current,
                "log_end_offset": end,
                "lag": None if current is None else max(end - current, 0),
                "member_id": member["member_id"] if member else None,
                "client_id": member["client_id"] if member else None,
                "host": member["host"] if member else None,
            }
        )
    coordinator = description.coordinator.id if description.coordinator else None
    return _Described(
        group, state, coordinator, description.partition_assignor or "", members, offsets
    )


def describe_groups(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    described: list[Any] = []
    tables = []
    for group in args.groups:
        share_group = _describe_share_group(conn, group)
        if share_group is not None:
            described.append(share_group)
            tables.append(_share_group_table(share_group))
        else:
            consumer_group = describe_group(client, conn, group)
            described.append(consumer_group)
            tables.append(_consumer_group_table(consumer_group))
    emit(args.format, [d.as_json() for d in described], tables)
    return 0


def _describe_share_group(conn: Connection, group: str) -> Any:
    """The share group `group` (PLAINTEXT only), or None for any other group."""
    if not _plaintext(conn):
        return None
    from kafkalite.tools.share_groups import describe_share_group  # trio, kio

    return describe_share_group(conn, conn.bootstrap.split(",")[0].strip(), group)


def _share_group_table(d: Any) -> tuple[str, list[str], list[list[Any]]]:
    title = (
        f"Share group {d.group}: {d.state}, {len(d.members)} member(s), "
        f"coordinator {d.coordinator}, total lag {d.total_lag}"
    )
    headers = ["TOPIC", "PARTITION", "START-OFFSET", "LAG", "MEMBER", "CLIENT", "HOST"]
    columns = ("topic", "partition", "start_offset", "lag", "member_id", "client_id", "host")
    return title, headers, [[o[c] for c in columns] for o in d.offsets]


def _consumer_group_table(d: _Described) -> tuple[str, list[str], list[list[Any]]]:
    title = (
        f"Group {d.group}: {d.state}, {len(d.members)} member(s), "
        f"coordinator {d.coordinator}, total lag {d.total_lag}"
    )
    headers = ["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER", "CLIENT", "HOST"]
    columns = (
        "topic",
        "partition",
        "committed_offset",
        "log_end_offset",
        "lag",
        "member_id",
        "client_id",
        "host",
    )
    return title, headers, [[o[c] for c in columns] for o in d.offsets]


def _scope(client: Any, conn: Connection, args: argparse.Namespace, committed: dict) -> list:
    if args.all_topics:
        return sorted(committed)
    partitions = []
    for topic, chosen in args.topic:
        metadata = topic_metadata(client, conn, topic)
        if metadata is None:
            raise ToolError(f"cannot reset offsets: unknown topic {topic}")
        known = sorted(metadata.partitions)
        missing = sorted(set(chosen or []) - set(known))
        if missing:
            raise ToolError(f"cannot reset offsets: topic {topic} has no partition {missing[0]}")
        partitions += [(topic, p) for p in (chosen if chosen is not None else known)]
    return partitions


def _targets(
    client: Any, conn: Connection, args: argparse.Namespace, partitions: list, committed: dict
) -> dict[tuple[str, int], int]:
    starts = _offsets(client, conn, partitions, OffsetSpec.earliest())
    ends = _offsets(client, conn, partitions, OffsetSpec.latest())
    if args.to_earliest:
        return starts
    if args.to_latest:
        return ends
    if args.to_datetime is not None:
        found = _offsets(client, conn, partitions, OffsetSpec.for_timestamp(args.to_datetime))
        return {tp: ends[tp] if found[tp] < 0 else found[tp] for tp in partitions}
    targets = {}
    for tp in partitions:
        if args.to_offset is not None:
            wanted = args.to_offset
        else:
            wanted = committed.get(tp, ends[tp]) + args.shift_by
        targets[tp] = min(max(wanted, starts[tp]), ends[tp])  # Kafka's tool clamps too
    return targets


def reset_offsets(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    futures = client.describe_consumer_groups([args.group], request_timeout=conn.timeout)
    (description,) = wait_all(futures, conn, "cannot describe group").values()
    state = _state(description.state)
    if state not in _INACTIVE:
        raise ToolError(
            f"cannot reset offsets of group {args.group}: it must be inactive (no members), "
            f"its state is {state}"
        )
    committed = _committed(client, conn, args.group)
    partitions = _scope(client, conn, args, committed)
    if not partitions:
        raise UsageError(f"group {args.group} has no committed offsets to reset")
    targets = _targets(client, conn, args, partitions, committed)
    if args.execute:
        request = [
            ConsumerGroupTopicPartitions(
                args.group, [TopicPartition(t, p, off) for (t, p), off in targets.items()]
            )
        ]
        futures = client.alter_consumer_group_offsets(request, request_timeout=conn.timeout)
        wait_all(futures, conn, "cannot commit offsets of group")
    plan = [
        {"topic": t, "partition": p, "previous_offset": committed.get((t, p)), "new_offset": off}
        for (t, p), off in sorted(targets.items())
    ]
    title = None if args.execute else "Dry run: nothing committed (add --execute to apply)"
    rows = [[r["topic"], r["partition"], r["previous_offset"], r["new_offset"]] for r in plan]
    emit(
        args.format,
        {"group": args.group, "executed": args.execute, "offsets": plan},
        [(title, ["TOPIC", "PARTITION", "PREVIOUS", "NEW"], rows)],
    )
    return 0


def delete_groups(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    futures = client.delete_consumer_groups(list(args.groups), request_timeout=conn.timeout)
    wait_all(futures, conn, "cannot delete group")
    emit(
        args.format,
        {"deleted": list(args.groups)},
        [(None, ["DELETED"], [[g] for g in args.groups])],
    )
    return 0


def delete_group_offsets(args: argparse.Namespace) -> int:
    """As `kafka-consumer-groups.sh --delete-offsets`: allowed for an empty group, or for
    topics its members do not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise)."""
    from kafkalite.tools.raw_requests import delete_offsets, require_plaintext  # trio, kio

    conn = connection(args)
    require_plaintext(conn, "group delete-offsets")
    client = admin_client(conn)
    partitions: dict[str, list[int]] = {}
    for topic, chosen in args.topic:
        metadata = topic_metadata(client, conn, topic)
        if metadata is None:
            raise ToolError(f"unknown topic {topic}")
        partitions[topic] = chosen if chosen is not None else sorted(metadata.partitions)
    address = conn.bootstrap.split(",")[0].strip()
    group_error, errors = delete_offsets(conn, address, args.group, partitions)
    if group_error != 0:
        raise ToolError(f"cannot delete offsets of group {args.group}: {group_error.name.upper()}")
    rows = [
        {"topic": t, "partition": p, "error": None if e == 0 else e.name.upper()}
        for (t, p), e in sorted(errors.items())
    ]
    table = [[r["topic"], r["partition"], r["error"] or "deleted"] for r in rows]
    emit(args.format, rows, [(None, ["TOPIC", "PARTITION", "STATUS"], table)])
    return 1 if any(r["error"] for r in rows) else 0
