"""The share coordinator (KIP-932) on the coordinator runtime: the durable state of every
share-partition, in `__share_group_state` (Kafka's ShareCoordinatorService and
ShareCoordinatorShard).

A share-partition's state is keyed by (group, topic id, partition); the state partition is
the hash of Kafka's coordinator key "group:topicId:partition". A write is a ShareUpdate of the
batches the leader changed, or every so often a ShareSnapshot of the whole state (Kafka's
records and policy, share/share_records.py), answered once committed; a load replays the
snapshots and overlays the updates on them. The partition leaders of this broker call it
directly, those of other brokers through Kafka's share-state RPCs (apis/share_group_state.py,
broker/share_persister.py). A write from a leader of an older leader epoch, or for an older
state epoch (the share-partition was reset since), is fenced, as Kafka's ShareCoordinatorShard:
FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH; a read by a newer leader records its epoch first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from kafkalite.broker.group_coordinator_service import coordinator_append_error
from kafkalite.broker.partition_loader import Batch
from kafkalite.coordinator.records import InvalidRecord
from kafkalite.share.share_partition import StateBatch
from kafkalite.share.share_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareState,
    ShareUpdate,
    apply_update,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    snapshot_record,
    update_record,
)
from kafkalite.storage.records import decode_records

if TYPE_CHECKING:
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.config import BrokerConfig

log = logging.getLogger("kafkalite.share")

SHARE_STATE_TOPIC = "__share_group_state"


def share_state_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """Kafka's fixed settings of `__share_group_state` (ShareCoordinatorService)."""
    return {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "min.insync.replicas": str(config.int("share.coordinator.state.topic.min.isr")),
        "segment.bytes": str(config.int("share.coordinator.state.topic.segment.bytes")),
        "retention.ms": "-1",
    }


@dataclass(eq=False)
class ShareCoordinatorService:
    config: BrokerConfig
    replica_manager: ReplicaManager
    runtime: CoordinatorRuntime = field(init=False)
    states: dict[SharePartitionKey, ShareState] = field(default_factory=dict)
    # ShareUpdate records written (or replayed) since each key's last ShareSnapshot.
    updates: dict[SharePartitionKey, int] = field(default_factory=dict)
    # When each key's state was last written (its newest record's timestamp): dead letters
    # written after it may not be in its state yet (broker/share_dead_letters.py).
    written_at: dict[SharePartitionKey, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.runtime = CoordinatorRuntime(self._topic_spec, self.replica_manager, self)

    def _topic_spec(self) -> InternalTopic:
        return InternalTopic(
            SHARE_STATE_TOPIC,
            self.config.int("share.coordinator.state.topic.num.partitions"),
            self.config.int("share.coordinator.state.topic.replication.factor"),
            share_state_topic_configs(self.config),
        )

    def load(self) -> None:
        loaded = self.runtime.start()
        if loaded is not None:
            log.info("loaded %d record(s) from %s", loaded, SHARE_STATE_TOPIC)

    # -- the runtime's shard ---------------------------------------------------------------

    def replay(self, index: int, batches: list[Batch]) -> int:
        loaded = 0
        for header, batch in batches:
            if header.is_control:
                continue
            for record in decode_records(batch):
                if record.key is None:
                    continue
                try:
                    loaded += self._replay(record.key, record.value, record.timestamp)
                except InvalidRecord as exc:
                    log.warning(
                        "skipping %s record at %d: %s", SHARE_STATE_TOPIC, record.offset, exc
                    )
        return loaded

    def _replay(self, key_bytes: bytes, value: bytes | None, timestamp: int) -> int:
        record_type, key = decode_key(key_bytes)
        self.written_at[key] = max(timestamp, self.written_at.get(key, timestamp))
        if value is None:
            self.states.pop(key, None)
            self.updates.pop(key, None)
            self.written_at.pop(key, None)
        elif record_type == SHARE_SNAPSHOT:
            self.states[key] = decode_snapshot(value)
            self.updates[key] = 0
        else:
            state = self.states.get(key)
            if state is not None:
                self.states[key] = apply_update(state, decode_update(value))
                self.updates[key] = self.updates.get(key, 0) + 1
        return 1

    def unload(self, index: int) -> None:
        for key in [k for k in self.states if self.partition_of(k) == index]:
            del self.states[key]
            self.updates.pop(key, None)
            self.written_at.pop(key, None)

    # -- reads and writes ------------------------------------------------------------------

    def partition_of(self, key: SharePartitionKey) -> int:
        return self.runtime.partition_for(key.coordinator_key())

    def read_state(self, key: SharePartitionKey) -> tuple[ErrorCode, ShareState | None]:
        """The persisted state (None: never initialized), or why it cannot be read here."""
        error = self.runtime.check(key.coordinator_key())
        if error is not ErrorCode.none:
            return error, None
        return ErrorCode.none, self.states.get(key)

    async def read_state_for_leader(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[ErrorCode, ShareState | None]:
        """A partition leader's read (Kafka's ReadShareGroupState): fenced when an older
        leader asks; a newer leader's epoch is written first, so the old one's writes are
        fenced from then on (Kafka's readStateAndMaybeUpdateLeaderEpoch)."""
        error, state = self.read_state(key)
        if error is not ErrorCode.none or state is None or leader_epoch < 0:
            return error, state
        if leader_epoch < state.leader_epoch:
            return ErrorCode.fenced_leader_epoch, None
        if leader_epoch > state.leader_epoch:
            error = await self.write_state(key, leader_epoch, -1, [], state.state_epoch)
            if error is not ErrorCode.none:
                return error, None
        return self.read_state(key)

    def fenced(self, key: SharePartitionKey, leader_epoch: int, state_epoch: int) -> ErrorCode:
        """Why a write from this leader and state epoch is refused (NONE: it is not); -1
        leaves an epoch unchecked."""
        current = self.states.get(key)
        if current is None:
            return ErrorCode.none
        if 0 <= leader_epoch < current.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if 0 <= state_epoch < current.state_epoch:
            return ErrorCode.fenced_state_epoch
        return ErrorCode.none

    async def write_state(
        self,
        key: SharePartitionKey,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
        state_epoch: int = -1,
    ) -> ErrorCode:
        """Record what the partition leader changed (Kafka's WriteShareGroupState): a
        ShareUpdate with its batches, or a ShareSnapshot of the merged state when the
        share-partition has none yet or has had
        `share.coordinator.snapshot.update.records.per.snapshot` updates since its last
        (Kafka's ShareCoordinatorShard). NONE once committed. `state_epoch` -1: unchecked."""
        error = self.runtime.check(key.coordinator_key())
        if error is ErrorCode.none:
            error = self.fenced(key, leader_epoch, state_epoch)
        if error is not ErrorCode.none:
            return error
        current = self.states.get(key)
        epoch = current.snapshot_epoch if current is not None else 0
        update = ShareUpdate(epoch, leader_epoch, start_offset, tuple(batches))
        per_snapshot = self.config.int("share.coordinator.snapshot.update.records.per.snapshot")
        if current is None or self.updates.get(key, 0) >= per_snapshot:
            base = current or ShareState(0, 0, leader_epoch, start_offset, ())
            merged = apply_update(base, update)
            now = self.replica_manager.clock_ms()
            state = ShareState(
                epoch + 1 if current is not None else 0,
                merged.state_epoch,
                leader_epoch,
                merged.start_offset,
                merged.batches,
                create_timestamp=now,
                write_timestamp=now,
            )
            record, updates = snapshot_record(key, state), 0
        else:
            state = apply_update(current, update)
            record, updates = update_record(key, update), self.updates.get(key, 0) + 1
        index, now = self.partition_of(key), self.replica_manager.clock_ms()
        error = self.runtime.append(index, [record], timestamp_ms=now)
        if error is ErrorCode.none:
            self.states[key], self.updates[key] = state, updates
            self.written_at[key] = now
            failed = await self.runtime.committed([index], self.config.int("request.timeout.ms"))
            error = failed.get(index, ErrorCode.none)
        return ErrorCode.none if error is ErrorCode.none else coordinator_append_error(error)

    def group_states(self, group_id: str) -> dict[SharePartitionKey, ShareState]:
        """The persisted state of each initialized share-partition of the group (Kafka's
        ShareGroupStatePartitionMetadata's initialized topics, and their summaries)."""
        return {key: state for key, state in self.states.items() if key.group_id == group_id}

    async def initialize_state(self, key: SharePartitionKey, start_offset: int) -> ErrorCode:
        """Start the share-partition afresh at `start_offset` (Kafka's
        InitializeShareGroupState, as AlterShareGroupOffsets sends it): a ShareSnapshot of
        the next state epoch with nothing in flight; NONE once committed."""
        error = self.runtime.check(key.coordinator_key())
        if error is not ErrorCode.none:
            return error
        current = self.states.get(key)
        now = self.replica_manager.clock_ms()
        state = ShareState(
            current.snapshot_epoch + 1 if current is not None else 0,
            current.state_epoch + 1 if current is not None else 0,
            current.leader_epoch if current is not None else 0,
            start_offset,
            (),
            create_timestamp=now,
            write_timestamp=now,
        )
        index = self.partition_of(key)
        error = self.runtime.append(index, [snapshot_record(key, state)], timestamp_ms=now)
        if error is ErrorCode.none:
            self.states[key], self.updates[key] = state, 0
            self.written_at[key] = now
            failed = await self.runtime.committed([index], self.config.int("request.timeout.ms"))
            error = failed.get(index, ErrorCode.none)
        return ErrorCode.none if error is ErrorCode.none else coordinator_append_error(error)

    async def delete_state(self, keys: list[SharePartitionKey]) -> ErrorCode:
        """Forget these share-partitions: tombstones of their ShareSnapshot and ShareUpdate
        keys; NONE once committed."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for key in keys:
            tombstones = [
                (encode_key(SHARE_SNAPSHOT, key), None),
                (encode_key(SHARE_UPDATE, key), None),
            ]
            by_partition.setdefault(self.partition_of(key), []).extend(tombstones)
        for index, records in by_partition.items():
            error = self.runtime.append(
                index, records, timestamp_ms=self.replica_manager.clock_ms()
            )
            if error is not ErrorCode.none:
                return coordinator_append_error(error)
        for key in keys:
            del self.states[key]
            self.updates.pop(key, None)
            self.written_at.pop(key, None)
        failed = await self.runtime.committed(by_partition, self.config.int("request.timeout.ms"))
        if failed:
            return coordinator_append_error(next(iter(failed.values())))
        return ErrorCode.none

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loads elections ask for."""
        await self.runtime.run(task_status=task_status)
