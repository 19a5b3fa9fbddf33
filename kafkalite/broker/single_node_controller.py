"""`SingleNodeController`: the controller operations of a broker alone (broker/controller_api.py).

A one-broker Kafka: every partition has its only replica as leader, so an election is never
needed; the only valid reassignment is the current assignment (no move), and nothing is ever
moving. Dynamic broker configs are kept in a file in the first log dir and applied at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkalite.broker.cluster_metadata import ClusterMetadata
from kafkalite.broker.controller_api import (
    ELECTION_NOT_NEEDED,
    NONE,
    UNKNOWN_PARTITION,
    ApiError,
    BrokerConfigListener,
    OngoingReassignment,
    Targets,
    TopicPartition,
    check_reassignment,
    unknown_partition,
)
from kafkalite.broker.dynamic_config import DynamicConfigStore


class SingleNodeController:
    def __init__(self, metadata: ClusterMetadata, store: DynamicConfigStore) -> None:
        self.metadata = metadata
        self.store = store
        self._listeners: list[BrokerConfigListener] = []

    def subscribe(self, listener: BrokerConfigListener) -> None:
        self._listeners.append(listener)

    def stored_broker_configs(self) -> dict[str, dict[str, str]]:
        return self.store.load()

    def unclean_leader_elections(self) -> int:
        return 0  # one replica per partition: its only replica always leads

    async def elect_leaders(
        self, election_type: int, partitions: Sequence[TopicPartition] | None, timeout_s: float
    ) -> dict[TopicPartition, ApiError]:
        existing = {
            (name, s.partition)
            for name in self.metadata.topics
            for s in self.metadata.partition_states(name)
        }
        results = {}
        for tp in sorted(existing) if partitions is None else partitions:
            if tp in existing:  # one replica, leading: nothing to elect
                results[tp] = ELECTION_NOT_NEEDED
            else:
                results[tp] = unknown_partition(tp[0], tp[1], tp[0] in self.metadata.topics)
        return results

    async def alter_partition_reassignments(
        self, reassignments: Mapping[str, Targets], allow_rf_change: bool
    ) -> dict[str, dict[int, ApiError]]:
        live = {b.broker_id for b in self.metadata.brokers()}
        results: dict[str, dict[int, ApiError]] = {}
        for name, targets in reassignments.items():
            found = results[name] = {}
            for index, replicas in targets.items():
                state = self.metadata.partition_state(name, index)
                if state is None:
                    found[index] = UNKNOWN_PARTITION
                    continue
                current = tuple(state.replicas)
                refusal = check_reassignment(
                    current, current, False, replicas, live, allow_rf_change
                )
                found[index] = refusal or NONE
        return results

    async def list_partition_reassignments(self) -> dict[str, dict[int, OngoingReassignment]]:
        return {}

    async def alter_broker_configs(self, entity: str, configs: Mapping[str, str]) -> ApiError:
        self.store.save(entity, configs)
        for listener in self._listeners:
            listener.on_broker_configs_changed(entity, configs)
        return NONE
