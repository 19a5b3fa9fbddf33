"""The broker as handlers see it: config, identity, metadata and partitions."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
from kafkalite.broker.metadata_store import MetadataStore
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.config import BrokerConfig, Listener
from kafkalite.metrics import BrokerMetrics
from kafkalite.storage.log_dirs import LogDirs


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Broker:
    config: BrokerConfig
    store: MetadataStore
    replica_manager: ReplicaManager
    groups: GroupCoordinatorService
    clock_ms: Callable[[], int] = wall_clock_ms
    # Set and replaced on every append, so long-polling fetches wake up (see apis/fetch.py).
    data_arrived: trio.Event = field(default_factory=trio.Event)
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)

    @classmethod
    def open(cls, config: BrokerConfig, clock_ms: Callable[[], int] = wall_clock_ms) -> Broker:
        """Load metadata and every partition log (running recovery where needed)."""
        store = MetadataStore(config.log_dir)
        store.load(config.broker_id, config.str("cluster.id"))
        replica_manager = ReplicaManager(config, store, LogDirs.for_dirs(config.log_dirs), clock_ms)
        replica_manager.load()
        groups = GroupCoordinatorService(config, replica_manager)
        groups.load()
        broker = cls(config, store, replica_manager, groups, clock_ms)
        replica_manager.on_append = broker._notify_append
        return broker

    def _notify_append(self) -> None:
        self.data_arrived.set()
        self.data_arrived = trio.Event()

    @property
    def node_id(self) -> int:
        return self.config.broker_id

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    @property
    def advertised_listener(self) -> Listener:
        return self.config.advertised_listeners[0]

    def shutdown(self) -> None:
        self.replica_manager.shutdown()
