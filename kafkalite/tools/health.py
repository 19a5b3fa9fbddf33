"""`kafkalite cluster health`: what an operator checks first, from Metadata and the topics'
min.insync.replicas. Exit code 0 when healthy, 1 when not (or when the cluster does not answer).

- dead brokers: named in a partition's replica list but not registered (a broker that hosts
  no replica cannot be told from one that never existed: Metadata lists live brokers only);
- offline partitions: no leader;
- under-replicated partitions: an ISR smaller than the replica list;
- under-min-ISR partitions: an ISR smaller than the topic's min.insync.replicas (acks=all
  producers are refused).

`assess` is the judgement alone (no client), for tests and for other front ends.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import ConfigResource, ResourceType

from kafkalite.tools.common import admin_client, check_reachable, connection, wait_all
from kafkalite.tools.output import emit

EXIT_UNHEALTHY = 1


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Health:
    brokers: list[int]
    partitions: int
    dead_brokers: list[int] = field(default_factory=list)
    offline: list[PartitionState] = field(default_factory=list)
    under_replicated: list[PartitionState] = field(default_factory=list)
    under_min_isr: list[PartitionState] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        problems = (self.dead_brokers, self.offline, self.under_replicated, self.under_min_isr)
        return not any(problems)


def assess(
    brokers: Iterable[int], partitions: Iterable[PartitionState], min_isr: Mapping[str, int]
) -> Health:
    live = sorted(set(brokers))
    states = sorted(partitions, key=lambda p: (p.topic, p.partition))
    named = {replica for state in states for replica in state.replicas}
    health = Health(live, len(states), dead_brokers=sorted(named - set(live)))
    for state in states:
        if state.leader < 0:
            health.offline.append(state)
            continue
        if len(state.isr) < len(state.replicas):
            health.under_replicated.append(state)
        if len(state.isr) < min_isr.get(state.topic, 1):
            health.under_min_isr.append(state)
    return health


def register(sub: Any, parents: dict) -> None:
    health = sub.add_parser(
        "health",
        parents=[parents["connection"], parents["output"]],
        help="dead brokers, offline, under-replicated and under-min-ISR partitions (exit 1)",
    )
    health.set_defaults(run=cluster_health)


def cluster_health(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = admin_client(conn)
    metadata = check_reachable(client, conn)
    states = [
        PartitionState(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
        for name, topic in metadata.topics.items()
        if topic.error is None
        for p in topic.partitions.values()
    ]
    health = assess(metadata.brokers, states, _min_isr(client, conn, list(metadata.topics)))
    _report(args.format, health)
    return 0 if health.healthy else EXIT_UNHEALTHY


def _min_isr(client: Any, conn: Any, topics: list[str]) -> dict[str, int]:
    if not topics:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in topics]
    futures = client.describe_configs(resources, request_timeout=conn.timeout)
    configs = wait_all(futures, conn, "cannot describe topic config")
    found = {}
    for resource, entries in configs.items():
        entry = entries.get("min.insync.replicas")
        if entry is not None and entry.value is not None:
            found[resource.name] = int(entry.value)
    return found


def _report(fmt: str, health: Health) -> None:
    problems = [
        (kind, state)
        for kind, states in (
            ("offline", health.offline),
            ("under-replicated", health.under_replicated),
            ("under-min-isr", health.under_min_isr),
        )
        for state in states
    ]
    data = {
        "healthy": health.healthy,
        "brokers": health.brokers,
        "dead_brokers": health.dead_brokers,
        "partitions": health.partitions,
        **{
            kind.replace("-", "_"): [_state_json(s) for k, s in problems if k == kind]
            for kind in ("offline", "under-replicated", "under-min-isr")
        },
    }
    dead = ", ".join(map(str, health.dead_brokers)) or "none"
    title = (
        f"{'Healthy' if health.healthy else 'Unhealthy'}: brokers {_ids(health.brokers)}, "
        f"dead brokers {dead}, {health.partitions} partitions"
    )
    rows = [
        [kind, s.topic, s.partition, s.leader, _ids(s.replicas), _ids(s.isr)]
        for kind, s in problems
    ]
    headers = ["PROBLEM", "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    if rows or fmt == "json":
        emit(fmt, data, [(title, headers, rows)])
    else:
        sys.stdout.write(f"{title}\n")


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def _state_json(state: PartitionState) -> dict[str, Any]:
    return {
        "topic": state.topic,
        "partition": state.partition,
        "leader": state.leader,
        "replicas": list(state.replicas),
        "isr": list(state.isr),
    }
