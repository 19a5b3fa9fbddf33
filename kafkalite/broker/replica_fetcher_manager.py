"""Which fetcher follows which partition (Kafka's ReplicaFetcherManager).

The ReplicaManager calls `add_partition` when a partition becomes a follower (again under a
new leader or epoch) and `remove_partition` when it becomes leader, is deleted or leaves this
broker. Partitions of one leader are spread over `num.replica.fetchers` fetchers by hash, as
Kafka's getFetcherId. Fetchers are trio tasks started in the nursery `run` opens; partitions
added before it starts wait for it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import trio

from kafkalite.broker.cluster_metadata import ClusterMetadata, Endpoint
from kafkalite.broker.delay_store_replica import store_source
from kafkalite.broker.delayed import TopicPartition
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_fetcher import BuildAuxState, FetchSettings, ReplicaFetcher
from kafkalite.config import BrokerConfig
from kafkalite.security.inter_broker import inter_broker_security

FetcherKey = tuple[int, int]  # (leader broker id, fetcher index)


def fetch_settings(config: BrokerConfig) -> FetchSettings:
    return FetchSettings(
        broker_id=config.broker_id,
        max_bytes=config.int("replica.fetch.max.bytes"),
        wait_max_ms=config.int("replica.fetch.wait.max.ms"),
        min_bytes=config.int("replica.fetch.min.bytes"),
        backoff_ms=config.int("replica.fetch.backoff.ms"),
        socket_timeout_ms=config.int("replica.socket.timeout.ms"),
        security=inter_broker_security(config),
    )


def inter_broker_endpoint(
    config: BrokerConfig, metadata: ClusterMetadata, broker_id: int
) -> Endpoint | None:
    """Another broker's endpoint on the inter-broker listener (inter.broker.listener.name,
    security.inter.broker.protocol, else the first advertised listener)."""
    info = metadata.broker(broker_id)
    if info is None or not info.endpoints:
        return None
    return info.endpoint(config.inter_broker_listener) or info.endpoints[0]


class ReplicaFetcherManager:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: ClusterMetadata,
        clock_ms: Callable[[], int],
        on_progress: Callable[[list[TopicPartition]], None] = lambda _: None,
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.clock_ms = clock_ms
        self.on_progress = on_progress
        self.fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._fetcher_of: dict[TopicPartition, FetcherKey] = {}
        self._nursery: trio.Nursery | None = None
        self._progress = trio.Event()
        # Tiered storage: a follower's rebuild from the remote tier (set by the broker).
        self.build_aux_state: BuildAuxState | None = None

    def _fetcher_id(self, tp: TopicPartition) -> int:
        """A partition's delay store is fetched with the partition (same fetcher)."""
        count = self.config.int("num.replica.fetchers")
        source = store_source(tp[1])
        index = tp[1] if source is None else source
        return (zlib.crc32(tp[0].encode()) + 31 * index) % count

    def endpoint_of(self, broker_id: int) -> Endpoint | None:
        return inter_broker_endpoint(self.config, self.metadata, broker_id)

    # -- membership -------------------------------------------------------------------------

    def add_partition(self, partition: Partition) -> None:
        """Follow `partition` from its current leader (moving it off any previous one)."""
        tp = (partition.topic, partition.index)
        self.remove_partition(tp)
        key = (partition.leader_id, self._fetcher_id(tp))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(
                partition.leader_id,
                fetch_settings(self.config),
                self.endpoint_of,
                self.clock_ms,
                self._progressed,
                self._build_remote_log_aux_state,
            )
            if self._nursery is not None:
                self._nursery.start_soon(fetcher.run)
        fetcher.add(partition)
        self._fetcher_of[tp] = key

    async def _build_remote_log_aux_state(self, partition: Partition, offset: int) -> bool:
        if self.build_aux_state is None:  # not tiered here: start empty there
            partition.truncate_fully_and_start_at(offset)
            return True
        return await self.build_aux_state(partition, offset)

    def remove_partition(self, tp: TopicPartition) -> None:
        key = self._fetcher_of.pop(tp, None)
        if key is not None:
            self.fetchers[key].remove(tp)

    def followed(self) -> dict[TopicPartition, int]:
        """Each followed partition's leader broker id."""
        return {tp: key[0] for tp, key in self._fetcher_of.items()}

    # -- progress (tests and the ReplicaManager wait on it) ---------------------------------

    def _progressed(self, tps: list[TopicPartition]) -> None:
        self.on_progress(tps)
        self._progress.set()
        self._progress = trio.Event()

    async def wait_for_progress(self) -> None:
        """Until some fetcher next applies a response."""
        await self._progress.wait()

    # -- the tasks --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every fetcher (idle ones wait for partitions) until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for fetcher in self.fetchers.values():
                nursery.start_soon(fetcher.run)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
