"""Helpers of the cluster tests with real processes (the `start_brokers` fixture is in
conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import ControllerEpoch, KafkaZkClient
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


# -- partition states written by hand (controller tests without broker processes) -------------

Layout = Mapping[str, list[tuple[tuple[int, ...], int, tuple[int, ...]]]]


def run_on_layout(
    zk_connect: str,
    layout: Layout,
    scenario: Callable[[ZkClient, ControllerEpoch], Awaitable[Any]],
) -> Any:
    """Brokers 1 and 2 registered, broker 1 the controller, and `layout`'s topics (per
    partition: replicas, leader, ISR, at leader epoch 4) written; then `scenario`."""

    async def main() -> Any:
        async with ZkClient.open(zk_connect) as zk:
            kafka_zk = KafkaZkClient(zk)
            await kafka_zk.create_top_level_paths()
            for broker_id in (1, 2):
                endpoint = zd.Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
                await kafka_zk.register_broker(zd.BrokerInfo(broker_id, (endpoint,)))
            epoch = await kafka_zk.try_become_controller(1)
            assert epoch is not None
            for topic, partitions in layout.items():
                assignment = {p: zd.ReplicaAssignment(r) for p, (r, _, _) in enumerate(partitions)}
                await kafka_zk.create_topic(topic, zd.TopicAssignment(assignment))
                for p, (_, leader, isr) in enumerate(partitions):
                    state = zd.PartitionState(leader, 4, isr, epoch.epoch)
                    await kafka_zk.create_partition_state(topic, p, state, epoch)
            return await scenario(zk, epoch)

    return trio.run(main)


async def partition_state(
    zk: ZkClient, topic: str, partition: int
) -> tuple[int, int, tuple[int, ...]]:
    """(leader, leader epoch, ISR) of a partition, as ZooKeeper has it."""
    found = await KafkaZkClient(zk).partition_state(topic, partition)
    assert found is not None
    return found.state.leader, found.state.leader_epoch, found.state.isr


def read_int_values(
    consumer: Any, until: Callable[[list[int]], bool], wait: float, quiet: float = 0.0
) -> list[int]:
    """Integer values read until `until(values)` holds (at most `wait` s), then `quiet` s
    more, so a record served twice is seen."""
    read: list[int] = []
    deadline = time.monotonic() + wait
    while not until(read) and time.monotonic() < deadline:
        _read_one(consumer, read)
    quiet_until = time.monotonic() + quiet
    while time.monotonic() < quiet_until:
        _read_one(consumer, read)
    return read


def _read_one(consumer: Any, read: list[int]) -> None:
    message = consumer.poll(0.2)
    if message is not None and message.error() is None:
        read.append(int(message.value()))
