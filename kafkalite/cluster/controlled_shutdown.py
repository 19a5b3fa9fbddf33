"""Controlled shutdown, sans-IO: the request a stopping broker leaves for the controller and
what the broker still waits for.

Kafka's ZooKeeper-era broker sends ControlledShutdown (api key 7) to the controller; kio (Kafka
4's schemas) has no such message, and kafkalite's brokers reach the controller through
ZooKeeper anyway, so the request is an ephemeral znode `/admin/controlled_shutdown/<id>`
holding the broker epoch (the czxid of its `/brokers/ids/<id>`). The controller honours a
request only while that epoch is the live registration's, and the ephemeral node goes with
the session, so a restarted broker is never taken for a stopping one. The controller's moves
are leader_election.controlled_shutdown_writes; `remaining` is Kafka's answer to the request
(partitionLeadersOnBroker), worked out by the broker from its own metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Set

from kafkalite.broker.partition import NO_LEADER, PartitionState

REQUESTS = "/admin/controlled_shutdown"


def request_path(broker_id: int) -> str:
    return f"{REQUESTS}/{broker_id}"


def encode_request(broker_epoch: int) -> bytes:
    return json.dumps({"version": 1, "broker_epoch": broker_epoch}, separators=(",", ":")).encode()


def decode_request(data: bytes) -> int | None:
    """The broker epoch of a request; None when the znode is not one."""
    try:
        value = json.loads(data)
        return int(value["broker_epoch"])
    except (ValueError, TypeError, KeyError):
        return None


def remaining(
    broker_id: int, states: Iterable[PartitionState], available: Set[int]
) -> list[tuple[str, int]]:
    """The partitions the controller could still move off `broker_id`, given the brokers
    `available` to take over (live, not shutting down themselves): led by it with another
    available replica (Kafka retries while RF > 1; with nobody to take over there is nothing
    to wait for, as when every broker of a cluster stops at once), or followed by it while it
    is still in the ISR of an available leader."""
    left = []
    for state in states:
        if state.leader == broker_id:
            if any(r != broker_id and r in available for r in state.replicas):
                left.append((state.topic, state.partition))
        elif state.leader != NO_LEADER and state.leader in available and broker_id in state.isr:
            left.append((state.topic, state.partition))
    return left
