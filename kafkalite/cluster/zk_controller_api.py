"""`ZkControllerApi`: the controller operations of a broker in a ZooKeeper cluster
(broker/controller_api.py), as Kafka's ZooKeeper-era KafkaController and ZkAdminManager.

* ElectLeaders runs on the controller (cluster/election_zk.py: conditional state writes behind
  the controller epoch) and answers once this broker's metadata shows the new leaders (Kafka's
  DelayedElectLeader); another broker raises NotController and its handler forwards.
* Reassignments are started and cancelled by the controller in ZooKeeper
  (cluster/reassignment_zk.py); its rounds complete them. The moves in progress are read from
  the topic znodes.
* Dynamic broker configs are written to `/config/brokers/<entity>` with a change notification
  (Kafka's AdminZkClient.changeBrokerConfig) by whichever broker receives the request; every
  broker applies them through its ZkConfigManager (cluster/zk_config_manager.py), the
  receiving one at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.controller_api import (
    NONE,
    NOT_CONTROLLER,
    ApiError,
    BrokerConfigListener,
    NotController,
    OngoingReassignment,
    Targets,
    TopicPartition,
)
from kafkalite.cluster import election_zk, reassignment, reassignment_zk
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.kafka_zk import ControllerMoved
from kafkalite.cluster.zk_client import ZkError
from kafkalite.cluster.zk_config_manager import BROKERS, ZkConfigManager
from kafkalite.cluster.zk_metadata import ZkMetadata

log = logging.getLogger(__name__)
TIMED_OUT = ApiError(ErrorCode.request_timed_out, "The request timed out.")


class ZkControllerApi:
    def __init__(self, metadata: ZkMetadata, controller: Controller) -> None:
        self.metadata = metadata
        self.controller = controller
        self.configs = ZkConfigManager(metadata.zk, metadata.node_id, self._tell)
        self._stored: dict[str, dict[str, str]] = {}
        self._listeners: list[BrokerConfigListener] = []
        self._unclean_on_request = 0  # ElectLeaders' unclean elections applied

    async def start(self) -> None:
        """Read the stored dynamic broker configs (before Broker.open)."""
        self._stored = await self.configs.read_broker_configs()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the dynamic broker config changes until cancelled."""
        await self.configs.run(task_status=task_status)

    def subscribe(self, listener: BrokerConfigListener) -> None:
        self._listeners.append(listener)

    def stored_broker_configs(self) -> dict[str, dict[str, str]]:
        return {entity: dict(configs) for entity, configs in self._stored.items()}

    def _tell(self, entity: str, configs: Mapping[str, str]) -> None:
        for listener in self._listeners:
            try:
                listener.on_broker_configs_changed(entity, configs)
            except Exception:  # the config watch must survive a listener's bug
                log.exception("broker config listener %r failed on %s", listener, entity)

    def unclean_leader_elections(self) -> int:
        return self.controller.unclean_elections + self._unclean_on_request

    # -- ElectLeaders ---------------------------------------------------------------------------

    async def elect_leaders(
        self, election_type: int, partitions: Sequence[TopicPartition] | None, timeout_s: float
    ) -> dict[TopicPartition, ApiError]:
        epoch = self.controller.epoch
        if epoch is None:
            raise NotController()
        try:
            results = await election_zk.elect_leaders(
                self.controller.zk, epoch, election_type, partitions
            )
        except ZkError as exc:  # ControllerMoved, or ZooKeeper out of reach
            log.info("ElectLeaders not run as controller: %s", exc)
            raise NotController() from exc
        expected = {tp: e.write.state.leader for tp, e in results.items() if e.write is not None}

        def applied(tp: TopicPartition) -> bool:
            state = self.metadata.partition_state(*tp)
            return state is not None and state.leader == expected[tp]

        await self.metadata.wait_until(lambda: all(map(applied, expected)), timeout_s)
        unclean = [tp for tp, e in results.items() if e.write is not None and e.write.unclean]
        self._unclean_on_request += len([tp for tp in unclean if applied(tp)])
        return {
            tp: TIMED_OUT if tp in expected and not applied(tp) else ApiError(e.error, e.message)
            for tp, e in results.items()
        }

    # -- reassignments --------------------------------------------------------------------------

    async def alter_partition_reassignments(
        self, reassignments: Mapping[str, Targets], allow_rf_change: bool
    ) -> dict[str, dict[int, ApiError]]:
        live = {b.broker_id for b in self.metadata.brokers()}
        results: dict[str, dict[int, ApiError]] = {}
        for topic, targets in reassignments.items():
            epoch = self.controller.epoch
            if epoch is None:
                results[topic] = dict.fromkeys(targets, NOT_CONTROLLER)
                continue
            try:
                refusals = await reassignment_zk.start(
                    self.controller.zk, epoch, topic, targets, live, allow_rf_change
                )
            except ControllerMoved:
                results[topic] = dict.fromkeys(targets, NOT_CONTROLLER)
                continue
            results[topic] = {index: refusal or NONE for index, refusal in refusals.items()}
        return results

    async def list_partition_reassignments(self) -> dict[str, dict[int, OngoingReassignment]]:
        moving = await reassignment_zk.ongoing(self.controller.zk)
        return {
            topic: {
                index: OngoingReassignment(a.replicas, a.adding_replicas, a.removing_replicas)
                for index, a in assignment.partitions.items()
                if reassignment.in_progress(a)
            }
            for topic, (assignment, _) in moving.items()
        }

    # -- dynamic broker configs -----------------------------------------------------------------

    async def alter_broker_configs(self, entity: str, configs: Mapping[str, str]) -> ApiError:
        try:
            await self.metadata.kafka_zk.set_entity_config(BROKERS, entity, dict(configs))
        except ZkError as exc:
            return ApiError(ErrorCode.unknown_server_error, f"ZooKeeper write failed: {exc}")
        self._tell(entity, configs)  # this broker at once; the others by the notification
        return NONE
