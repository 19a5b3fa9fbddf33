"""`kafkalite cluster info`: brokers, controller and cluster id (from a Metadata request);
`kafkalite cluster health`: kafkalite/tools/health.py."""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.tools import health
from kafkalite.tools.common import admin_client, check_reachable, connection
from kafkalite.tools.output import emit


def register(commands: Any, parents: dict, parser_class: type) -> None:
    # `kafkalite cluster` alone is the local cluster launcher (kafkalite/cluster/launcher.py):
    # `info` is an optional sub-command of the same parser.
    cluster = commands.choices.get("cluster") or commands.add_parser("cluster")
    sub = cluster.add_subparsers(dest="action", parser_class=parser_class, metavar="[info|health]")
    info = sub.add_parser(
        "info", parents=[parents["connection"], parents["output"]], help="brokers and controller"
    )
    info.set_defaults(run=cluster_info)
    health.register(sub, parents)


def cluster_info(args: argparse.Namespace) -> int:
    conn = connection(args)
    metadata = check_reachable(admin_client(conn), conn)
    brokers = [
        {
            "id": b.id,
            "host": b.host,
            "port": b.port,
            "controller": b.id == metadata.controller_id,
        }
        for b in sorted(metadata.brokers.values(), key=lambda b: b.id)
    ]
    info = {
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "brokers": brokers,
    }
    title = f"Cluster {metadata.cluster_id}, controller {metadata.controller_id}"
    rows = [[b["id"], b["host"], b["port"], b["controller"]] for b in brokers]
    emit(args.format, info, [(title, ["BROKER", "HOST", "PORT", "CONTROLLER"], rows)])
    return 0
