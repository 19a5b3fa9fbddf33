"""Helpers of the cluster tests with real processes (the `start_brokers` fixture is in
conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import trio

from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.testing import BrokerProcess
from tests.integration.e2e_helpers import wait_until

CLUSTER_SESSION_TIMEOUT_MS = 4000


StartBrokers = Callable[[Mapping[str, str]], dict[int, BrokerProcess]]


def poll(condition: Callable[[], Any], what: str, wait: float = 60.0) -> Any:
    """Ask again until `condition` answers something truthy (the cluster converges)."""
    return wait_until(condition, wait, 0.1, what)


def zk_read(zk_connect: str, read: Callable[[KafkaZkClient], Any]) -> Any:
    """What `read` answers from the cluster's ZooKeeper (a session of its own)."""

    async def main() -> Any:
        async with ZkClient.open(zk_connect) as zk:
            return await read(KafkaZkClient(zk))

    return trio.run(main)
