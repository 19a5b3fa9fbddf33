"""What the console flags: unhealthy partitions and brokers that left the cluster.

Pure functions over metadata as clients see it (no client calls here). The partition checks
are Kafka's TopicCommand ones (`kafka-topics.sh --describe --under-replicated-partitions`,
`--under-min-isr-partitions`, `--unavailable-partitions`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PROBLEMS = ("offline", "under_min_isr", "under_replicated")
UNKNOWN = {"host": None, "port": None, "rack": None, "controller": False}  # known by id only


def partition_health(
    leader: int, replicas: list[int], isr: list[int], min_isr: int, live: set[int]
) -> dict[str, bool]:
    """A partition without a live leader is offline (and under min ISR, as Kafka counts it);
    fewer in-sync replicas than replicas is under-replicated; fewer than the topic's
    min.insync.replicas is under min ISR (acks=all produce fails there)."""
    offline = leader < 0 or leader not in live
    return {
        "offline": offline,
        "under_min_isr": offline or len(isr) < min_isr,
        "under_replicated": len(isr) < len(replicas),
    }


def count_problems(partitions: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many of `partitions` (each with partition_health's flags) have each problem."""
    counts = dict.fromkeys(PROBLEMS, 0)
    for partition in partitions:
        for problem in PROBLEMS:
            counts[problem] += bool(partition[problem])
    return counts


@dataclass
class BrokerRegistry:
    """Every broker the console has seen: a broker no longer registered in the cluster is
    listed offline rather than dropped (as Kafka UIs do). Replica lists name brokers too, so a
    broker that died before the console started is known from the partitions it hosts."""

    seen: dict[int, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, live: list[dict[str, Any]], replica_ids: Iterable[int]) -> list[dict]:
        """`live`: the brokers registered now (id, host, port, rack, controller); the answer
        adds `online` to each and lists the others seen, offline, by id."""
        live_ids = {broker["id"] for broker in live}
        with self._lock:
            for broker in live:
                self.seen[broker["id"]] = {**broker, "controller": False}
            for broker_id in replica_ids:
                self.seen.setdefault(broker_id, {**UNKNOWN, "id": broker_id})
            offline = [
                {**known, "online": False}
                for broker_id, known in self.seen.items()
                if broker_id not in live_ids
            ]
        online = [{**broker, "online": True} for broker in live]
        return sorted(online + offline, key=lambda broker: broker["id"])
