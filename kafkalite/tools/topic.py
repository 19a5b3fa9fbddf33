"""`kafkalite topic create|list|describe|alter-config|add-partitions|delete`."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from kafkalite.tools.broker_metrics import scrape
from kafkalite.tools.common import (
    Connection,
    ToolError,
    admin_client,
    check_reachable,
    connection,
    key_value,
    positive_int,
    topic_metadata,
    wait_all,
)
from kafkalite.tools.config_cmd import alter, alteration, describe_configs, is_override
from kafkalite.tools.held_records import Held, held_records
from kafkalite.tools.log_dirs import broker_addresses, leader_sizes
from kafkalite.tools.output import emit

EARLIEST_LOCAL, LATEST_TIERED = -4, -5  # ListOffsets' tiered storage specials
# A view's configs (broker/views.py, not imported: it brings the broker).
VIEW_SOURCE, VIEW_FILTER = "kafkalite.view.source", "kafkalite.view.filter"


def register(commands: Any, parents: dict, parser_class: type) -> None:
    both = [parents["connection"], parents["output"]]
    topic = commands.add_parser("topic", help="create, list, describe, alter and delete topics")
    sub = topic.add_subparsers(dest="action", required=True, parser_class=parser_class)

    create = sub.add_parser("create", parents=both, help="create topics")
    create.add_argument("topics", nargs="+", metavar="TOPIC")
    create.add_argument("-p", "--partitions", type=positive_int, default=None)
    create.add_argument("-r", "--replication-factor", type=positive_int, default=None)
    create.add_argument(
        "-c", "--config", action="append", type=key_value, default=[], metavar="KEY=VALUE"
    )
    create.set_defaults(run=create_topics)

    listing = sub.add_parser("list", parents=both, help="list topics")
    listing.add_argument("-i", "--internal", action="store_true", help="include internal topics")
    listing.set_defaults(run=list_topics)

    describe = sub.add_parser("describe", parents=both, help="partitions, offsets and configs")
    describe.add_argument("topics", nargs="+", metavar="TOPIC")
    describe.add_argument(
        "--metrics",
        action="append",
        default=[],
        metavar="URL",
        help="a broker's Prometheus endpoint (repeatable): adds held delayed records and"
        " remote log sizes",
    )
    describe.set_defaults(run=describe_topics)

    alter = sub.add_parser("alter-config", parents=both, help="set or delete topic configs")
    alter.add_argument("topic", metavar="TOPIC")
    alter.add_argument(
        "-s", "--set", action="append", type=key_value, default=[], metavar="KEY=VALUE"
    )
    alter.add_argument("-d", "--delete", action="append", default=[], metavar="KEY")
    alter.set_defaults(run=alter_topic_config)

    add = sub.add_parser("add-partitions", parents=both, help="grow a topic's partition count")
    add.add_argument("topic", metavar="TOPIC")
    add.add_argument(
        "-t", "--total", type=positive_int, required=True, help="the new partition count"
    )
    add.set_defaults(run=add_partitions)

    delete = sub.add_parser("delete", parents=both, help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.set_defaults(run=delete_topics)


def create_topics(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    new = [
        NewTopic(
            name,
            num_partitions=args.partitions or -1,
            replication_factor=args.replication_factor or -1,
            config=dict(args.config),
        )
        for name in args.topics
    ]
    futures = client.create_topics(
        new, operation_timeout=conn.timeout, request_timeout=conn.timeout
    )
    wait_all(futures, conn, "cannot create topic")
    described = [_visible(client, conn, name) for name in args.topics]
    rows = [[t["name"], len(t["partitions"]), t["replication_factor"]] for t in described]
    emit(args.format, {"created": described}, [(None, ["TOPIC", "PARTITIONS", "REPLICAS"], rows)])
    return 0


def _visible(client: Any, conn: Connection, name: str) -> dict[str, Any]:
    """A new topic as metadata shows it, once every partition has a leader (Kafka acks
    CreateTopics before its metadata carries the topic)."""
    deadline = time.monotonic() + conn.timeout
    while True:
        topic = client.list_topics(topic=name, timeout=conn.timeout).topics.get(name)
        ready = topic is not None and topic.error is None and topic.partitions
        if ready and all(p.leader >= 0 for p in topic.partitions.values()):
            return describe(client, conn, [name], with_offsets=False)[0]
        if time.monotonic() >= deadline:
            raise ToolError(f"topic {name} was created but has no leader after {conn.timeout:g}s")
        time.sleep(0.05)


def list_topics(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    metadata = check_reachable(client, conn)
    names = [n for n in sorted(metadata.topics) if args.internal or not n.startswith("__")]
    views = view_definitions(client, conn, names)
    topics = []
    for name in names:
        partitions = metadata.topics[name].partitions.values()
        replicas = max((len(p.replicas) for p in partitions), default=0)
        view_of, view_filter = views.get(name, (None, None))
        topics.append(
            {
                "name": name,
                "partitions": len(partitions),
                "replication_factor": replicas,
                "view_of": view_of,
                "filter": view_filter,
            }
        )
    headers = ["TOPIC", "PARTITIONS", "REPLICAS"]
    rows = [[t["name"], t["partitions"], t["replication_factor"]] for t in topics]
    if views:  # the view columns only when there are views to show
        headers += ["VIEW-OF", "FILTER"]
        for row, t in zip(rows, topics, strict=True):
            row += [t["view_of"] or "-", t["filter"] or "-"]
    emit(args.format, topics, [(None, headers, rows)])
    return 0


def view_definitions(client: Any, conn: Connection, names: list[str]) -> dict[str, tuple[str, str]]:
    """{view: (source, filter)} of the views among `names` (issue 18), from one
    DescribeConfigs of them all. A topic whose configs cannot be read (deleted since the
    listing, or not authorized) is listed as a plain topic."""
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = client.describe_configs(resources, request_timeout=conn.timeout)
    views = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=conn.timeout + 5)
        except (KafkaException, TimeoutError):
            continue
        source, text = entries.get(VIEW_SOURCE), entries.get(VIEW_FILTER)
        if source is not None and source.value and text is not None:
            views[resource.name] = (source.value, text.value)
    return views


def describe(
    client: Any, conn: Connection, names: list[str], with_offsets: bool = True
) -> list[dict[str, Any]]:
    """Partitions with leaders, replicas and ISR, and (with_offsets) log start/end offsets.

    Sizes are `null` here: describe_topics adds them (DescribeLogDirs: tools/log_dirs.py)."""
    described = []
    for name in names:
        topic = topic_metadata(client, conn, name)
        if topic is None:
            raise ToolError(f"cannot describe topic {name}: it does not exist")
        partitions = [
            {
                "partition": p.id,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isrs),
                "log_start_offset": None,
                "log_end_offset": None,
                "size_bytes": None,
            }
            for p in sorted(topic.partitions.values(), key=lambda p: p.id)
        ]
        if with_offsets:
            _add_offsets(client, conn, name, partitions)
        replicas = max((len(p["replicas"]) for p in partitions), default=0)
        described.append({"name": name, "replication_factor": replicas, "partitions": partitions})
    return described


def _add_offsets(client: Any, conn: Connection, name: str, partitions: list[dict]) -> None:
    for key, spec in (
        ("log_start_offset", OffsetSpec.earliest()),
        ("log_end_offset", OffsetSpec.latest()),
    ):
        request = {TopicPartition(name, p["partition"]): spec for p in partitions}
        if not request:
            return
        results = wait_all(
            client.list_offsets(request, request_timeout=conn.timeout),
            conn,
            "cannot list offsets of",
        )
        by_partition = {tp.partition: info.offset for tp, info in results.items()}
        for p in partitions:
            p[key] = by_partition[p["partition"]]


def describe_topics(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    described = describe(client, conn, args.topics)
    metadata = check_reachable(client, conn)
    sizes = leader_sizes(conn, metadata, set(args.topics))
    for topic in described:
        for p in topic["partitions"]:
            p["size_bytes"] = sizes.get((topic["name"], p["partition"]))
        topic["configs"] = {
            entry["name"]: entry["value"]
            for entry in describe_configs(client, conn, "topic", topic["name"])
            if is_override("topic", entry)
        }
        topic["tiered"] = topic["configs"].get("remote.storage.enable") == "true"
        topic["view_of"] = topic["configs"].get(VIEW_SOURCE)  # a view (issue 18)
        if topic["tiered"]:
            add_tier_offsets(conn, metadata, topic)
    if args.metrics:
        _add_held(described, held_records(args.metrics, conn.timeout))
        add_remote_sizes(described, args.metrics, conn.timeout)
    tables = []
    for topic in described:
        overrides = ", ".join(f"{k}={v}" for k, v in topic["configs"].items()) or "-"
        title = (
            f"Topic {topic['name']}: {len(topic['partitions'])} partition(s), "
            f"replication factor {topic['replication_factor']}, configs: {overrides}"
        )
        if topic["view_of"] is not None:
            title += f"; a view of {topic['view_of']}"
        if topic.get("remote_size_bytes") is not None:
            title += (
                f"; remote: {topic['remote_size_bytes']} bytes"
                f" in {topic['remote_segments']} segment(s)"
            )
        rows = [
            [
                p["partition"],
                p["leader"],
                p["replicas"],
                p["isr"],
                p["log_start_offset"],
                p["log_end_offset"],
                p["size_bytes"],
            ]
            for p in topic["partitions"]
        ]
        headers = ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START", "LOG-END", "SIZE"]
        if topic["tiered"]:
            headers += ["LOCAL-START", "REMOTE-END"]
            for row, p in zip(rows, topic["partitions"], strict=True):
                row += [p["local_start_offset"], p["remote_end_offset"]]
        if args.metrics:
            headers += ["HELD", "NEXT-DUE"]
            for row, p in zip(rows, topic["partitions"], strict=True):
                row += [p["held_records"], p["next_due"]]
        tables.append((title, headers, rows))
    emit(args.format, described, tables)
    return 0


def add_tier_offsets(conn: Connection, metadata: Any, topic: dict[str, Any]) -> None:
    """A tiered topic's local log start (ListOffsets -4) and highest offset in remote storage
    (-5, KIP-1005) per partition, asked of each leader (PLAINTEXT only, else null)."""
    partitions = topic["partitions"]
    for p in partitions:
        p["local_start_offset"] = p["remote_end_offset"] = None
    if conn.client.get("security.protocol", "plaintext").lower() != "plaintext":
        return
    from kafkalite.tools.raw_requests import list_offsets  # trio, kio

    addresses = broker_addresses(metadata)
    by_leader: dict[int, list[dict[str, Any]]] = {}
    for p in partitions:
        if p["leader"] in addresses:
            by_leader.setdefault(p["leader"], []).append(p)
    for leader, led in by_leader.items():
        indexes = [p["partition"] for p in led]
        for key, spec in (
            ("local_start_offset", EARLIEST_LOCAL),
            ("remote_end_offset", LATEST_TIERED),
        ):
            found = list_offsets(conn, addresses[leader], topic["name"], indexes, spec)
            for p in led:
                p[key] = found.get(p["partition"])


def add_remote_sizes(described: list[dict[str, Any]], urls: list[str], timeout: float) -> None:
    """Each tiered topic's remote bytes and segments (Kafka's RemoteLogSizeBytes and
    RemoteLogMetadataCount, summed over the brokers' leaders)."""
    # (Imported here: the metrics package brings trio, which `--help` must not load.)
    from kafkalite.metrics.remote_storage import REMOTE_COUNT_METRIC, REMOTE_SIZE_METRIC

    samples = scrape(urls, (REMOTE_SIZE_METRIC, REMOTE_COUNT_METRIC), timeout)
    for topic in described:
        if not topic["tiered"]:
            continue
        for key, name in (
            ("remote_size_bytes", REMOTE_SIZE_METRIC),
            ("remote_segments", REMOTE_COUNT_METRIC),
        ):
            topic[key] = int(
                sum(s.value for s in samples[name] if s.labels.get("topic") == topic["name"])
            )


def _add_held(described: list[dict[str, Any]], held: Held) -> None:
    """Each partition's held delayed records and when the next is due (ISO 8601, UTC)."""
    for topic in described:
        for p in topic["partitions"]:
            count, due = held.get((topic["name"], p["partition"]), (0, None))
            p["held_records"] = count
            p["next_due"] = (
                datetime.fromtimestamp(due / 1000, tz=UTC).isoformat(timespec="milliseconds")
                if due is not None
                else None
            )


def alter_topic_config(args: argparse.Namespace) -> int:
    resource = alteration("topic", args.topic, args.set, args.delete)
    conn = connection(args)
    changed = alter(admin_client(conn), conn, resource)
    rows = [[name, "-" if value is None else value] for name, value in changed.items()]
    emit(
        args.format, {"topic": args.topic, "changed": changed}, [(None, ["CONFIG", "VALUE"], rows)]
    )
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    futures = client.create_partitions(
        [NewPartitions(args.topic, args.total)],
        operation_timeout=conn.timeout,
        request_timeout=conn.timeout,
    )
    wait_all(futures, conn, "cannot add partitions to topic")
    result = {"topic": args.topic, "partitions": args.total}
    emit(args.format, result, [(None, ["TOPIC", "PARTITIONS"], [[args.topic, args.total]])])
    return 0


def delete_topics(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    futures = client.delete_topics(
        list(args.topics), operation_timeout=conn.timeout, request_timeout=conn.timeout
    )
    wait_all(futures, conn, "cannot delete topic")
    emit(
        args.format,
        {"deleted": list(args.topics)},
        [(None, ["DELETED"], [[t] for t in args.topics])],
    )
    return 0
