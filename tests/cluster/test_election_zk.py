"""The controller's elections on request against a real ZooKeeper (znodes written by hand, no
broker processes): ElectLeaders' outcomes and writes, the automatic rebalance, and a deposed
controller fenced (the controlled shutdown's moves: test_controlled_shutdown_controller.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from cluster_helpers import partition_state, run_on_layout
from kio.schema.errors import ErrorCode

from kafkalite.cluster import election_zk
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import ControllerEpoch, ControllerMoved, KafkaZkClient
from kafkalite.cluster.leader_election import PREFERRED, UNCLEAN
from kafkalite.cluster.zk_client import ZkClient

pytestmark = pytest.mark.slow
NOT_NEEDED = "Leader election not needed for topic partition."
# topic -> per partition (replicas, leader, isr); broker 3 is not registered.
LAYOUT = {
    "t": [((1, 2, 3), 2, (1, 2)), ((2, 1, 3), 2, (2, 1)), ((1, 2, 3), 1, (1, 2))],
    "u": [((3, 1), -1, (3,)), ((3,), -1, (3,))],
}


def run(zk_connect: str, scenario: Callable[[ZkClient, ControllerEpoch], Awaitable[Any]]) -> Any:
    return run_on_layout(zk_connect, LAYOUT, scenario)


state = partition_state


def test_elect_leaders_preferred_and_unclean(zk_connect: str) -> None:
    async def scenario(zk: ZkClient, epoch: ControllerEpoch) -> None:
        named = [("t", 0), ("t", 1), ("t", 2), ("t", 9), ("nope", 0)]
        results = await election_zk.elect_leaders(zk, epoch, PREFERRED, named)
        assert {tp: (r.error, r.message) for tp, r in results.items()} == {
            ("t", 0): (ErrorCode.none, None),
            ("t", 1): (ErrorCode.election_not_needed, NOT_NEEDED),
            ("t", 2): (ErrorCode.election_not_needed, NOT_NEEDED),
            ("t", 9): (ErrorCode.unknown_topic_or_partition, "No such partition as t-9"),
            ("nope", 0): (ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
        }
        assert await state(zk, "t", 0) == (1, 5, (1, 2))

        everything = await election_zk.elect_leaders(zk, epoch, UNCLEAN, None)
        assert {tp: r.error for tp, r in everything.items()} == {
            ("t", 0): ErrorCode.election_not_needed,
            ("t", 1): ErrorCode.election_not_needed,
            ("t", 2): ErrorCode.election_not_needed,
            ("u", 0): ErrorCode.none,  # broker 1 is live but not in the ISR: unclean
            ("u", 1): ErrorCode.eligible_leaders_not_available,
        }
        assert await state(zk, "u", 0) == (1, 5, (1,))
        assert await state(zk, "u", 1) == (-1, 4, (3,))

    run(zk_connect, scenario)


def test_rebalance_and_a_deposed_controller(zk_connect: str) -> None:
    async def scenario(zk: ZkClient, epoch: ControllerEpoch) -> None:
        # Broker 1 prefers t-0 and t-2 and leads t-2 only: 50% imbalance.
        assert await election_zk.rebalance(zk, epoch, 50) == 0
        assert await election_zk.rebalance(zk, epoch, 10) == 1
        assert await state(zk, "t", 0) == (1, 5, (1, 2))

        await zk.delete(zd.CONTROLLER)
        newer = await KafkaZkClient(zk).try_become_controller(2)
        assert newer is not None and newer.epoch == epoch.epoch + 1
        with pytest.raises(ControllerMoved):
            await election_zk.elect_leaders(zk, epoch, UNCLEAN, [("u", 0)])
        assert await state(zk, "u", 0) == (-1, 4, (3,))

    run(zk_connect, scenario)
