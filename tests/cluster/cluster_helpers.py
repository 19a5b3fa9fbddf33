"""Helpers of the cluster tests with real processes (the `start_brokers` fixture is in
conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.testing import BrokerProcess

CLUSTER_SESSION_TIMEOUT_MS = 4000


StartBrokers = Callable[[Mapping[str, str]], dict[int, BrokerProcess]]


def poll(condition: Callable[[], Any], what: str, wait: float = 60.0) -> Any:
    """Ask again until `condition` answers something truthy (the cluster converges)."""
    deadline = time.monotonic() + wait
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return value


def zk_read(zk_connect: str, read: Callable[[KafkaZkClient], Any]) -> Any:
    """What `read` answers from the cluster's ZooKeeper (a session of its own)."""

    async def main() -> Any:
        async with ZkClient.open(zk_connect) as zk:
            return await read(KafkaZkClient(zk))

    return trio.run(main)
