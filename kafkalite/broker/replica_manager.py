"""Topics and partitions of this broker, and the data path every API goes through (Kafka's
ReplicaManager.scala): produce (`append_records`), fetch (`fetch_messages`), ListOffsets,
OffsetForLeaderEpoch and DeleteRecords. It creates and removes local replicas as the cluster
metadata reports topics and partitions; topic administration is the AdminManager's
(broker/admin_manager.py).

Each partition's replication state lives in its `Partition` (broker/partition.py). Requests
that must wait (acks=all until the high watermark covers them, fetches below min_bytes) are
delayed operations keyed by partition (broker/delayed.py); every append retries the ones
watching its partition. Sans-IO: the trio side waits in broker/delayed_wait.py.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkalite.broker.admin_manager import AdminManager, Outcome
from kafkalite.broker.cluster_metadata import BrokerInfo, ClusterMetadata, TopicMetadata
from kafkalite.broker.delay_store_replica import (
    FencedPartition,
    StoreLeader,
    store_partition,
    store_source,
)
from kafkalite.broker.delayed import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    DeleteRecordsStatus,
    FetchedPartition,
    FetchInfo,
    FetchParams,
    FetchRead,
    ProducePartitionStatus,
    ProduceResult,
    Purgatory,
    TopicPartition,
)
from kafkalite.broker.delayed_delivery_manager import DelayedDelivery
from kafkalite.broker.partition import (
    NO_LEADER,
    NOT_FOUND,
    UNDEFINED_EPOCH,
    LogReadResult,
    Partition,
    PartitionState,
)
from kafkalite.broker.topic_config import effective_value, log_config_for
from kafkalite.broker.views import View, ViewCatalog, is_view, view_refusal
from kafkalite.config import BrokerConfig
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.errors import StorageError
from kafkalite.storage.header_index import HeaderIndexes, index_names, read_indexed
from kafkalite.storage.log import LogConfig
from kafkalite.storage.log_dirs import LogDirs
from kafkalite.storage.record_filter import filter_batches

log = logging.getLogger("kafkalite.replica_manager")

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})


def _configs_of(meta: TopicMetadata | None) -> Mapping[str, str]:
    return meta.configs if meta is not None else {}


@dataclass
class Topic:
    """The partitions of a topic this broker holds a replica of (a subset in a cluster)."""

    metadata: TopicMetadata
    partitions: dict[int, Partition]

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def topic_id(self) -> uuid.UUID:
        return self.metadata.topic_id


class FollowerFetchers(Protocol):
    """What the ReplicaManager asks of the replica fetchers (ReplicaFetcherManager)."""

    def add_partition(self, partition: Partition) -> None: ...

    def remove_partition(self, tp: TopicPartition) -> None: ...


class CoordinatorListener(Protocol):
    """A coordinator whose state lives in an internal topic (Kafka's onLeadershipChange:
    GroupCoordinator/TransactionCoordinator onElection and onResignation)."""

    def on_election(self, topic: str, index: int, leader_epoch: int) -> None: ...

    def on_resignation(self, topic: str, index: int, leader_epoch: int | None) -> None: ...


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: ClusterMetadata,
        log_manager: LogDirs,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.node_id = config.broker_id
        self.metadata = metadata
        self.log_manager = log_manager
        self.clock_ms = clock_ms
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.produce_purgatory = Purgatory("Produce")
        self.fetch_purgatory = Purgatory("Fetch")
        self.delete_records_purgatory = Purgatory("DeleteRecords")
        # Followers fetch through it (broker/replica_fetcher_manager.py); set by the Broker.
        self.fetchers: FollowerFetchers | None = None
        # Told when this broker gains or loses leadership of an internal topic's partition.
        self.coordinators: list[CoordinatorListener] = []
        # ISR changes this broker asked for as leader (Kafka's IsrShrinksPerSec/IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._following = True  # False once a controlled shutdown began (stop_following)
        self.admin_manager: AdminManager | None = None  # set by the Broker; see create_topic
        # Held records of topics that opted in to delayed delivery, per partition.
        self.delayed_delivery = DelayedDelivery(
            lambda: self.config,
            self._partition_of,
            lambda: self.metadata.topics,
            allocate_producer_id=lambda: self.metadata.allocate_producer_id(),
            min_insync_replicas=self.min_insync_replicas,
        )
        # Topics that read another topic through a filter: no replica, read at the source.
        self.views = ViewCatalog(metadata)
        self.header_indexes = HeaderIndexes()  # per segment, for views' reads
        # Told of each partition of a deleted topic before its log goes (tiered storage
        # deletes the topic's remote objects).
        self.topic_partition_deleted: list[Callable[[Partition], None]] = []

    # -- lifecycle -------------------------------------------------------------------------

    def load(self) -> None:
        """Open every partition log this broker holds a replica of (dropping the others),
        apply the partitions' current states, then follow the metadata's changes."""
        topics = self.metadata.topics
        logs = self.log_manager.load(
            lambda name, _: log_config_for(self.config, _configs_of(topics.get(name))),
            self.clock_ms(),
        )
        for name, index in list(logs):
            state = self.metadata.partition_state(name, index)
            if state is None or self.node_id not in state.replicas:
                self.log_manager.delete_log(name, index)
        for meta in topics.values():
            for state in self.metadata.partition_states(meta.name):
                self.on_partition_state_changed(meta, state)
        self.delayed_delivery.load(
            {(t.name, i): p for t in self.topics.values() for i, p in t.partitions.items()},
            self.clock_ms(),
        )
        self.metadata.subscribe(self)

    # -- metadata changes (a MetadataListener, see broker/cluster_metadata.py) --------------

    def on_partition_state_changed(self, meta: TopicMetadata, state: PartitionState) -> None:
        """Kafka's becomeLeaderOrFollower for one partition: create its replica if needed,
        then make it leader or follower (stale epochs are fenced by the Partition). A view
        has no replica: its source's serve it."""
        if is_view(meta):
            return
        if self.node_id not in state.replicas:
            self._remove_replica(meta.name, state.partition)  # moved away, if it was here
            return
        partition = self.partition(meta.name, state.partition) or self._create_partition(
            meta, state.partition
        )
        now = self.clock_ms()
        previous = (partition.leader_id, partition.leader_epoch)
        if state.leader == self.node_id:
            error = partition.make_leader(self._with_local_epoch(partition, state), now)
        else:
            error = partition.make_follower(state)
        if error is not ErrorCode.none:
            log.info(
                "%s-%d: ignoring stale state %s (%s)", meta.name, state.partition, state, error.name
            )
            return
        current = (partition.leader_id, partition.leader_epoch)
        # A new replica's first leader is announced with the topic; log changes after that.
        if previous != (NO_LEADER, UNDEFINED_EPOCH) and current != previous:
            log.info(
                "%s-%d: leader %d at epoch %d (was %d at epoch %d), ISR %s",
                meta.name,
                state.partition,
                *current,
                *previous,
                list(partition.isr),
            )
        self._update_fetcher(partition)
        self._notify_coordinators(partition)
        # Parked requests may now be answerable (NOT_LEADER_OR_FOLLOWER after losing it).
        self._complete_delayed((meta.name, state.partition))

    def _update_fetcher(self, partition: Partition) -> None:
        """Kafka's makeFollowers: a follower fetches from its (maybe new) leader; a leader, or
        a follower without a leader, fetches from nobody."""
        if self.fetchers is None:
            return
        tp = (partition.topic, partition.index)
        store_tp = (partition.topic, store_partition(partition.index))
        if partition.is_leader or partition.leader_id < 0 or not self._following:
            self.fetchers.remove_partition(tp)
            self.fetchers.remove_partition(store_tp)
            if self.delayed_delivery.stop_copying(tp) is not None and partition.is_leader:
                self.delayed_delivery.take_over(partition, self.clock_ms())
        else:
            self.fetchers.add_partition(partition)
            self._update_store_copy(partition)

    def _update_store_copy(self, partition: Partition) -> None:
        """A followed partition's delay store is copied with it while its topic opts in
        (broker/delay_store_replica.py)."""
        assert self.fetchers is not None
        copy = self.delayed_delivery.copy_store(partition, self.clock_ms())
        if copy is not None:
            self.fetchers.add_partition(copy)
        elif self.delayed_delivery.stop_copying((partition.topic, partition.index)):
            self.fetchers.remove_partition((partition.topic, store_partition(partition.index)))

    def _notify_coordinators(self, partition: Partition, removed: bool = False) -> None:
        """The coordinators load a partition of their topic they now lead and unload one they
        no longer lead (both idempotent for a state they already applied)."""
        if partition.topic not in INTERNAL_TOPICS:
            return
        for coordinator in self.coordinators:
            if removed:
                coordinator.on_resignation(partition.topic, partition.index, None)
            elif partition.is_leader:
                coordinator.on_election(partition.topic, partition.index, partition.leader_epoch)
            else:
                coordinator.on_resignation(partition.topic, partition.index, partition.leader_epoch)

    def _with_local_epoch(self, partition: Partition, state: PartitionState) -> PartitionState:
        """A sole replica keeps the epoch its log was written in across restarts: no other
        broker can have led in a later epoch."""
        local = partition.log.leader_epoch_cache.latest_epoch
        if state.replicas == (self.node_id,) and local > state.leader_epoch:
            return replace(state, leader_epoch=local)
        return state

    def _create_partition(self, meta: TopicMetadata, index: int) -> Partition:
        topic = self.topics.get(meta.name)
        if topic is None:
            topic = self.topics[meta.name] = Topic(meta, {})
            self.topics_by_id[meta.topic_id] = topic
        log_ = self.log_manager.logs.get((meta.name, index))
        if log_ is None:
            log_config = log_config_for(self.config, meta.configs)
            log_ = self.log_manager.create_log(meta.name, index, log_config, self.clock_ms())
        partition = Partition(meta.name, meta.topic_id, index, log_, self.node_id)
        topic.partitions[index] = partition
        return partition

    def _remove_replica(self, name: str, index: int) -> None:
        """Kafka's StopReplica with deletion: this broker is no longer a replica."""
        topic = self.topics.get(name)
        partition = topic.partitions.pop(index, None) if topic is not None else None
        if topic is None or partition is None:
            return
        if not topic.partitions:
            del self.topics[name]
            del self.topics_by_id[topic.topic_id]
        if self.fetchers is not None:
            self.fetchers.remove_partition((name, index))
            self.fetchers.remove_partition((name, store_partition(index)))
        self._notify_coordinators(partition, removed=True)
        self.delayed_delivery.forget((name, index))
        self.log_manager.delete_log(name, index)
        self._complete_delayed((name, index))

    def on_topic_configs_changed(self, name: str, configs: Mapping[str, str]) -> None:
        topic = self.topics.get(name)
        if topic is None:
            return
        log_config = log_config_for(self.config, configs)
        for partition in topic.partitions.values():
            self.update_log_config(partition, log_config)
            following = not partition.is_leader and partition.leader_id >= 0
            if self.fetchers is not None and following and self._following:
                self._update_store_copy(partition)  # it may have opted in or out

    def update_log_config(self, partition: Partition, log_config: LogConfig) -> None:
        """A partition's log (and its delay store) take its topic's new log config."""
        partition.log.update_config(log_config)
        self.delayed_delivery.update_config((partition.topic, partition.index), log_config)

    def on_topic_deleted(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            return
        del self.topics_by_id[topic.topic_id]
        for partition in topic.partitions.values():
            for listener in self.topic_partition_deleted:
                listener(partition)
            if self.fetchers is not None:
                self.fetchers.remove_partition((name, partition.index))
                self.fetchers.remove_partition((name, store_partition(partition.index)))
            self._notify_coordinators(partition, removed=True)
            self.delayed_delivery.forget((name, partition.index))
            self.log_manager.delete_log(name, partition.index)
            self._complete_delayed((name, partition.index))  # they answer an unknown partition

    def on_broker_registered(self, broker: BrokerInfo) -> None:
        """Nothing to do yet: followers find their leader through partition states."""

    def on_broker_gone(self, broker_id: int) -> None:
        """Nothing to do yet: the controller moves leadership and sends new states."""

    def stop_following(self) -> None:
        """A controlled shutdown: fetch from no leader from now on (Kafka's StopReplica without
        deletion), so no leader takes this broker back into its ISR."""
        self._following = False
        if self.fetchers is not None:
            for topic in self.topics.values():
                for partition in topic.partitions.values():
                    self.fetchers.remove_partition((topic.name, partition.index))
                    self.fetchers.remove_partition((topic.name, store_partition(partition.index)))

    def shutdown(self) -> None:
        self.delayed_delivery.close()
        self.log_manager.shutdown()

    # -- lookup ----------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        found = self.topics.get(topic)
        return found.partitions.get(index) if found is not None else None

    def _partition_of(self, tp: TopicPartition) -> Partition | None:
        return self.partition(*tp)

    def view(self, topic: str) -> View | None:
        """The view named `topic` (None for any other topic)."""
        return None if topic in self.topics else self.views.get(topic)

    def _fetch_key(self, tp: TopicPartition) -> TopicPartition:
        """The partition whose appends a parked fetch of `tp` waits for: a view's source, a
        delay store's partition (a hold appends to the store and wakes the partition's)."""
        source = store_source(tp[1])
        return (tp[0], source) if source is not None else self._source_tp(tp)

    def _source_tp(self, tp: TopicPartition) -> TopicPartition:
        """Where a partition's records are: a view's are in its source's partition."""
        view = self.view(tp[0])
        return tp if view is None else (view.source, tp[1])

    def _readable_partition(self, tp: TopicPartition) -> Partition | None:
        """The partition that serves reads of `tp` (a view's source partition)."""
        return self.partition(*tp) or self.partition(*self._source_tp(tp))

    def missing_partition_error(self, tp: TopicPartition) -> ErrorCode:
        """Kafka's getPartitionOrError for a partition with no replica here: one the cluster
        has is NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata), else unknown."""
        if self.metadata.partition_state(*tp) is not None:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def min_insync_replicas(self, tp: TopicPartition) -> int:
        topic = self.topics.get(tp[0])
        overrides = topic.metadata.configs if topic is not None else {}
        return int(effective_value(self.config, overrides, "min.insync.replicas")[0])

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self.topics_by_id.get(topic_id)

    @property
    def partition_count(self) -> int:
        """Partitions this broker holds a replica of."""
        return sum(len(topic.partitions) for topic in self.topics.values())

    def create_topic(
        self,
        name: str,
        num_partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str | None] | None = None,
    ) -> tuple[Outcome, TopicMetadata | None]:
        """AdminManager.create_topic, for those that hold the ReplicaManager (the coordinator
        runtime creating its internal topic on first use)."""
        assert self.admin_manager is not None, "set by the Broker"
        return self.admin_manager.create_topic(name, num_partitions, replication_factor, configs)

    # -- data path -------------------------------------------------------------------------

    def append_records(
        self,
        entries: Mapping[TopicPartition, bytes],
        required_acks: int,
        *,
        internal_topics_allowed: bool = False,
        coordinator: bool = False,
    ) -> tuple[dict[TopicPartition, ProduceResult], DelayedProduce | None]:
        """Kafka's appendRecords: append each partition's batches as leader. For acks=all the
        answer waits in the returned DelayedProduce (None: the results are final)."""
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, records in entries.items():
            result, required_offset = self._append_to_local_log(
                tp, records, required_acks, internal_topics_allowed, coordinator
            )
            held_until, self.delayed_delivery.held_until = self.delayed_delivery.held_until, -1
            statuses[tp] = ProducePartitionStatus(
                required_offset,
                result,
                acks_pending=result.error is ErrorCode.none,
                store_required_offset=held_until if result.error is ErrorCode.none else -1,
            )
        results = {tp: status.result for tp, status in statuses.items()}
        if required_acks != -1 or not any(s.acks_pending for s in statuses.values()):
            return results, None
        delayed = DelayedProduce(
            statuses,
            self._partition_of,
            self.min_insync_replicas,
            self.delayed_delivery.store_high_watermark,
        )
        return results, delayed

    def _append_to_local_log(
        self,
        tp: TopicPartition,
        records: bytes,
        required_acks: int,
        internal_allowed: bool,
        coordinator: bool = False,
    ) -> tuple[ProduceResult, int]:
        """One partition's append: (result, offset the high watermark must reach)."""
        if tp[0] in INTERNAL_TOPICS and not internal_allowed:
            # Only the coordinators write their own topics.
            message = f"Cannot append to internal topic {tp[0]}"
            return ProduceResult(ErrorCode.invalid_topic_exception, message=message), -1
        partition = self._partition_of(tp)
        if partition is None and (view := self.view(tp[0])) is not None:
            return ProduceResult(ErrorCode.invalid_topic_exception, message=view_refusal(view)), -1
        if partition is None:
            return ProduceResult(self.missing_partition_error(tp)), -1
        high_watermark = partition.high_watermark
        settings = self.delayed_delivery.settings(tp[0], self.topics[tp[0]].metadata.configs)
        if settings.active and not coordinator:
            appended = self.delayed_delivery.append(
                partition,
                records,
                settings,
                required_acks,
                self.min_insync_replicas(tp),
                self.clock_ms(),
            )
            moved, self.delayed_delivery.moved = self.delayed_delivery.moved, set()
            for other in moved - {tp}:  # (a retry topic's records moved elsewhere)
                self._after_append(other, True)
        else:
            appended = partition.append_records_to_leader(
                records,
                required_acks,
                self.min_insync_replicas(tp),
                self.clock_ms(),
                coordinator=coordinator,
            )
        if isinstance(appended, ErrorCode):
            return ProduceResult(appended), -1
        if isinstance(appended, StorageError):
            # Kafka reports offsets as -1 on a failed append; for record validation errors (its
            # RecordValidationException) also the log start offset, a message and the rejected
            # records (KIP-467) when the check was per record.
            error = appended.error_code
            if error not in (ErrorCode.invalid_timestamp, ErrorCode.invalid_record):
                return ProduceResult(error), -1
            refused = ProduceResult(
                error,
                log_start_offset=partition.log_start_offset,
                message=str(appended),
                record_errors=appended.record_errors,
            )
            return refused, -1
        self._after_append(tp, partition.high_watermark > high_watermark)
        result = ProduceResult(
            ErrorCode.none,
            appended.first_offset,
            appended.log_append_time_ms,
            appended.log_start_offset,
        )
        return result, appended.last_offset + 1

    def append_txn_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, marker: EndTxnMarker
    ) -> ErrorCode:
        """WriteTxnMarkers for one partition: the marker appended as leader; parked
        read_committed fetches may now see further (the last stable offset moved)."""
        return self.append_txn_marker_as_leader(tp, producer_id, producer_epoch, marker)[0]

    def append_txn_marker_as_leader(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, marker: EndTxnMarker
    ) -> tuple[ErrorCode, int]:
        """`append_txn_marker` with the offset the high watermark must reach before the
        marker is replicated (acks=all, as Kafka's handleWriteTxnMarkersRequest); -1 on error."""
        partition = self._partition_of(tp)
        if partition is None:
            return ErrorCode.unknown_topic_or_partition, -1
        high_watermark = partition.high_watermark
        if partition.is_leader:  # held records of the transaction: due, or dropped
            ended = self.delayed_delivery.end_txn(
                partition, producer_id, marker.commit, self.clock_ms()
            )
            if ended is not None:
                return ended.error_code, -1
        appended = partition.append_txn_marker(producer_id, producer_epoch, marker, self.clock_ms())
        if isinstance(appended, ErrorCode):
            return appended, -1
        if isinstance(appended, StorageError):
            return appended.error_code, -1
        for released in self.delayed_delivery.release_partition(partition, self.clock_ms()):
            if released != tp:  # (a retry topic's records moved elsewhere)
                self._after_append(released, True)
        self._after_append(tp, partition.high_watermark > high_watermark)
        return ErrorCode.none, appended + 1

    def delayed_markers(self, required: Mapping[TopicPartition, int]) -> DelayedProduce:
        """The acks=all wait of WriteTxnMarkers: each partition's high watermark must reach
        its required offset (run it through the produce purgatory)."""
        statuses = {
            tp: ProducePartitionStatus(offset, ProduceResult()) for tp, offset in required.items()
        }
        return DelayedProduce(statuses, self._partition_of, self.min_insync_replicas)

    def _complete_delayed(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def _after_append(self, tp: TopicPartition, high_watermark_moved: bool) -> None:
        """Kafka's tryCompleteDelayedRequests: new data may satisfy parked fetches; a higher
        high watermark may satisfy parked acks=all produces."""
        if high_watermark_moved:
            self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def release_delayed(self) -> int:
        """Append the due held records (delayed delivery); parked fetches of their partitions
        may now answer. Returns the records held still."""
        released = self.delayed_delivery.release_due(self.clock_ms())
        for tp in released:
            self._after_append(tp, True)
        return self.delayed_delivery.held

    def fetch_messages(self, params: FetchParams, infos: Sequence[FetchInfo]) -> DelayedFetch:
        """Kafka's fetchMessages: a fetch to complete at once or park until data arrives
        (run it through the fetch purgatory, as broker/delayed_wait.py does). A follower's
        positions are recorded here, once per request (never by the reads or retries of
        the DelayedFetch): the high watermark may move (parked acks=all produces complete)
        and the follower may rejoin the ISR."""
        if params.is_from_follower:
            for info in infos:
                self._update_follower_fetch_state(params.replica_id, info)
        return DelayedFetch(
            params,
            infos,
            lambda: self.read_from_local_log(params, infos),
            lambda tp: self._fetched_partition(tp, params.replica_id),
            self._fetch_key,
        )

    def _fetched_partition(self, tp: TopicPartition, replica_id: int) -> FetchedPartition | None:
        """What a parked fetch of `tp` reads: a delay store's pseudo-partition reads its
        store (broker/delay_store_replica.py), a fenced follower its partition up to the
        fence, a view its source."""
        store = self._store_leader(tp)
        if store is not None:
            return store if isinstance(store, StoreLeader) else None
        partition = self._readable_partition(tp)
        cap = self.delayed_delivery.read_cap(tp, replica_id) if replica_id >= 0 else None
        if partition is None or cap is None:
            return partition
        return FencedPartition(partition, cap)

    def _update_follower_fetch_state(self, replica_id: int, info: FetchInfo) -> None:
        store = self._store_leader(info.tp)
        if store is not None:
            moved = isinstance(store, StoreLeader) and store.record_follower_fetch(
                replica_id,
                info.fetch_offset,
                current_leader_epoch=info.current_leader_epoch,
                last_fetched_epoch=info.last_fetched_epoch,
            )
            if moved:  # acks=all of held batches wait on the store high watermark
                self.produce_purgatory.check_and_complete(self._fetch_key(info.tp))
            return
        partition = self._partition_of(info.tp)
        if partition is None or not partition.is_leader:
            return
        moved = partition.record_follower_fetch(
            replica_id,
            info.fetch_offset,
            current_leader_epoch=info.current_leader_epoch,
            last_fetched_epoch=info.last_fetched_epoch,
            now_ms=self.clock_ms(),
            log_start_offset=info.log_start_offset,
        )
        if moved:
            self._complete_delayed(info.tp)
        self.delete_records_purgatory.check_and_complete(info.tp)
        if replica_id in partition.isr:
            return
        # A follower joins the ISR with P's delay store copied too (broker/delay_store_replica.py).
        if self.delayed_delivery.store_in_sync(info.tp, replica_id, info.fetch_offset):
            proposal = partition.maybe_expand_isr(replica_id)
            if proposal is not None:
                self._alter_isr(partition, proposal)

    def _alter_isr(self, partition: Partition, new_isr: list[int]) -> None:
        """Ask the controller for `new_isr` (pending until the new state comes back)."""
        log.info("%s-%d: ISR %s -> %s", partition.topic, partition.index, partition.isr, new_isr)
        if len(new_isr) < len(partition.isr):
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        self.metadata.alter_isr(
            partition.topic,
            partition.index,
            new_isr,
            partition.leader_epoch,
            partition.partition_epoch,
        )

    def maybe_shrink_isrs(self) -> None:
        """Kafka's isr-expiration task: drop followers lagging past replica.lag.time.max.ms
        from the ISR of every partition this broker leads."""
        now, max_lag = self.clock_ms(), self.config.int("replica.lag.time.max.ms")
        for topic in list(self.topics.values()):
            for partition in list(topic.partitions.values()):
                proposal = partition.maybe_shrink_isr(now, max_lag)
                if proposal is not None:
                    self._alter_isr(partition, proposal)

    def read_from_local_log(self, params: FetchParams, infos: Sequence[FetchInfo]) -> FetchRead:
        """One pass over the partitions within max_bytes; the first batch found is returned
        whole even when larger than the limits (KIP-74)."""
        remaining, first, results = params.max_bytes, True, []
        for info in infos:
            if params.is_from_follower and store_source(info.partition) is not None:
                result = self._read_store(params.replica_id, info, remaining, first)
                if result.records:
                    first = False
                    remaining = max(remaining - len(result.records), 0)
                results.append(result)
                continue
            partition = self._partition_of(info.tp)
            view = self.view(info.topic) if partition is None else None
            if view is not None and not params.is_from_follower:
                partition = self._partition_of((view.source, info.partition))
            if partition is None:
                results.append(LogReadResult(self.missing_partition_error(info.tp)))
                continue
            read = self.view_read(view, partition) if view is not None else None
            if params.is_from_follower:
                read = self._fenced_read(partition, params.replica_id)
            result = partition.fetch_records(
                info.fetch_offset,
                min(info.max_bytes, remaining),
                current_leader_epoch=info.current_leader_epoch,
                replica_id=params.replica_id,
                isolation_level=params.isolation_level,
                min_one_batch=first,
                last_fetched_epoch=info.last_fetched_epoch,
                read=read,
            )
            if result.records:
                first = False
                remaining = max(remaining - len(result.records), 0)
            results.append(result)
        return FetchRead(tuple(results))

    def _fenced_read(
        self, partition: Partition, replica_id: int
    ) -> Callable[[int, int, int, bool], bytes] | None:
        """A follower's read of a partition whose delay store it copies stops where its copy
        lacks a release's intent (broker/delay_store_replica.py); None: an ordinary read."""
        cap = self.delayed_delivery.read_cap((partition.topic, partition.index), replica_id)
        if cap is None:
            return None
        log_ = partition.log
        return lambda offset, max_bytes, max_offset, min_one: log_.read(
            offset, max_bytes, min(max_offset, cap), min_one
        )

    def _store_leader(self, tp: TopicPartition) -> StoreLeader | ErrorCode | None:
        """The delay store a pseudo-partition index names, as its leader serves it
        (broker/delay_store_replica.py); None for an ordinary partition."""
        source = store_source(tp[1])
        if source is None:
            return None
        return self.delayed_delivery.store_leader((tp[0], source), self.clock_ms())

    def _read_store(
        self, replica_id: int, info: FetchInfo, remaining: int, first: bool
    ) -> LogReadResult:
        store = self._store_leader(info.tp)
        if not isinstance(store, StoreLeader):
            return LogReadResult(ErrorCode.unknown_topic_or_partition if store is None else store)
        return store.fetch_records(
            info.fetch_offset,
            min(info.max_bytes, remaining),
            replica_id=replica_id,
            current_leader_epoch=info.current_leader_epoch,
            min_one_batch=first,
            last_fetched_epoch=info.last_fetched_epoch,
        )

    def view_read(self, view: View, partition: Partition) -> Callable[[int, int, int, bool], bytes]:
        """How a view reads its source partition: through the header index when the topic
        indexes headers its filter can rule batches out by, else every batch, filtered."""
        log_, names = partition.log, index_names(partition.log.config.index_headers)
        if names and view.filter.uses_index(names):
            return lambda offset, max_bytes, max_offset, min_one: read_indexed(
                log_,
                self.header_indexes,
                names,
                offset,
                max_bytes,
                max_offset,
                min_one,
                lambda value_sets: view.filter.classify(value_sets, names),
                view.filter,
                view.stats,
            )

        def read_all(offset: int, max_bytes: int, max_offset: int, min_one: bool) -> bytes:
            records = log_.read(offset, max_bytes, max_offset, min_one)
            answer = filter_batches(records, view.filter, view.stats)
            view.stats.bytes_read += len(records)
            view.stats.bytes_served += len(answer)
            return answer

        return read_all

    def fetch_offset_for_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        current_leader_epoch: int = -1,
        isolation_level: int = 0,
        from_client: bool = True,
    ) -> tuple[ErrorCode, tuple[int, int, int]]:
        """ListOffsets for one partition: (error, (offset, timestamp, leader epoch)); a view
        answers with its source's offsets (they are the same)."""
        store = self._store_leader(tp) if not from_client else None
        if store is not None:
            if isinstance(store, StoreLeader):
                return store.offset_for_timestamp(timestamp, current_leader_epoch)
            return store, NOT_FOUND
        partition = self._readable_partition(tp)
        if partition is None:
            return self.missing_partition_error(tp), NOT_FOUND
        return partition.fetch_offset_for_timestamp(
            timestamp, current_leader_epoch, isolation_level, from_client
        )

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch for one partition: (error, epoch, end offset); a view
        answers with its source's; a delay store's pseudo-partition, its store's."""
        store = self._store_leader(tp)
        if store is not None:
            if isinstance(store, StoreLeader):
                return store.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)
            return store, -1, -1
        partition = self._readable_partition(tp)
        if partition is None:
            return self.missing_partition_error(tp), -1, -1
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def delete_records(self, tp: TopicPartition, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords for one partition: (error, new low watermark or -1)."""
        partition = self._partition_of(tp)
        if partition is None:
            return ErrorCode.unknown_topic_or_partition, -1
        if tp[0] in INTERNAL_TOPICS:  # their records belong to the coordinators
            return ErrorCode.invalid_topic_exception, -1
        return partition.delete_records_on_leader(offset)

    def delete_records_all(self, offsets: Mapping[TopicPartition, int]) -> DelayedDeleteRecords:
        """Kafka's deleteRecords: the leaders move their log start at once; the answer waits
        until the followers on live brokers have too (run it through
        `delete_records_purgatory`, as broker/delayed_wait.py does)."""
        statuses = {}
        for tp, offset in offsets.items():
            error, low_watermark = self.delete_records(tp, offset)
            if error is ErrorCode.none:
                statuses[tp] = DeleteRecordsStatus(required_offset=low_watermark)
            else:
                statuses[tp] = DeleteRecordsStatus(-1, error, -1, pending=False)
        return DelayedDeleteRecords(
            statuses, self._partition_of, lambda: {b.broker_id for b in self.metadata.brokers()}
        )

    def _high_watermarks(self) -> dict[TopicPartition, int]:
        return {
            (topic.name, p.index): p.high_watermark
            for topic in self.topics.values()
            for p in topic.partitions.values()
        }

    def apply_retention(self) -> int:
        """Retention never deletes a segment holding offsets at or above the high watermark
        (Kafka's UnifiedLog.deleteOldSegments)."""
        return self.log_manager.apply_retention(self.clock_ms(), self._high_watermarks())

    def clean_logs(self) -> int:
        """Compact the logs of cleanup.policy=compact topics; returns the bytes reclaimed."""
        return self.log_manager.clean_logs(self.clock_ms(), self._high_watermarks())

    def maintenance(self) -> None:
        """Periodic work: flush policy and checkpoints."""
        self.log_manager.flush_all(self.clock_ms())
        self.log_manager.checkpoint()
