"""`auto.leader.rebalance.enable` (Kafka's KafkaController auto-rebalance task): while this
broker is the controller, leaders go back to their preferred replicas every
`leader.imbalance.check.interval.seconds` (the moves are election_zk's `rebalance`)."""

from __future__ import annotations

import logging

import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.election_zk import rebalance
from kafkalite.cluster.zk_client import ZkError

log = logging.getLogger(__name__)


class LeaderRebalancer:
    """`auto.leader.rebalance.enable`: every `leader.imbalance.check.interval.seconds`, while
    this broker is the controller, leaders go back to their preferred replicas."""

    def __init__(self, controller: Controller, interval_s: float, imbalance_percentage: int):
        self.controller = controller
        self.interval_s = interval_s
        self.imbalance_percentage = imbalance_percentage

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self.interval_s)
            epoch = self.controller.epoch
            if epoch is None:
                continue
            try:
                moved = await rebalance(self.controller.zk, epoch, self.imbalance_percentage)
            except (ZkError, zd.ZkDataError) as exc:  # ControllerMoved, ZooKeeper out of reach
                log.info("leader rebalance check skipped: %s", exc)
                continue
            if moved:
                log.info("leader rebalance: %d partition(s) back on their preferred replica", moved)
