"""The share coordinator (KIP-932) on the coordinator runtime: the durable state of every
share-partition, in `__share_group_state` (Kafka's ShareCoordinatorService and
ShareCoordinatorShard).

A share-partition's state is keyed by (group, topic id, partition); the state partition is
the hash of Kafka's coordinator key "group:topicId:partition". Each write is a ShareSnapshot
record (Kafka's format, share/share_records.py) answered once committed; a load replays
snapshots and overlays ShareUpdate records on them, so a log written by Kafka's
delta-writing coordinator loads too. The partition leaders of this broker call it directly
(Kafka's Read/WriteShareGroupState RPCs between brokers are not served yet).
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
from kafkalite.share.share_records import (
    SHARE_SNAPSHOT,
    SharePartitionKey,
    ShareState,
    apply_update,
    decode_key,
    decode_snapshot,
    decode_update,
    snapshot_record,
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
                    loaded += self._replay(record.key, record.value)
                except InvalidRecord as exc:
                    log.warning(
                        "skipping %s record at %d: %s", SHARE_STATE_TOPIC, record.offset, exc
                    )
        return loaded

    def _replay(self, key_bytes: bytes, value: bytes | None) -> int:
        record_type, key = decode_key(key_bytes)
        if value is None:
            self.states.pop(key, None)
        elif record_type == SHARE_SNAPSHOT:
            self.states[key] = decode_snapshot(value)
        else:
            state = self.states.get(key)
            if state is not None:
                self.states[key] = apply_update(state, decode_update(value))
        return 1

    def unload(self, index: int) -> None:
        for key in [k for k in self.states if self.partition_of(k) == index]:
            del self.states[key]

    # -- reads and writes ------------------------------------------------------------------

    def partition_of(self, key: SharePartitionKey) -> int:
        return self.runtime.partition_for(key.coordinator_key())

    def read_state(self, key: SharePartitionKey) -> tuple[ErrorCode, ShareState | None]:
        """The persisted state (None: never initialized), or why it cannot be read here."""
        error = self.runtime.check(key.coordinator_key())
        if error is not ErrorCode.none:
            return error, None
        return ErrorCode.none, self.states.get(key)

    async def write_state(self, key: SharePartitionKey, state: ShareState) -> ErrorCode:
        """Write a snapshot of the share-partition; NONE once it is committed."""
        error = self.runtime.check(key.coordinator_key())
        if error is not ErrorCode.none:
            return error
        previous = self.states.get(key)
        epoch = previous.snapshot_epoch + 1 if previous is not None else 0
        state = ShareState(
            epoch, state.state_epoch, state.leader_epoch, state.start_offset, state.batches
        )
        index = self.partition_of(key)
        error = self.runtime.append(
            index, [snapshot_record(key, state)], timestamp_ms=self.replica_manager.clock_ms()
        )
        if error is ErrorCode.none:
            self.states[key] = state
            failed = await self.runtime.committed([index], self.config.int("request.timeout.ms"))
            error = failed.get(index, ErrorCode.none)
        return ErrorCode.none if error is ErrorCode.none else coordinator_append_error(error)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loads elections ask for."""
        await self.runtime.run(task_status=task_status)
