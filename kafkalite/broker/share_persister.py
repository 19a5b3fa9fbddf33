"""Where a share-partition leader reads and writes its share-partitions' state (Kafka's
DefaultStatePersister and PersisterStateManager).

The state of a share-partition lives with the share coordinator of its `__share_group_state`
partition. When this broker leads that partition the local ShareCoordinatorService answers;
otherwise Kafka's inter-broker RPCs go to the partition's leader: ReadShareGroupState (84) and
WriteShareGroupState (85), answered once the state is committed there; the group
coordinator's offsets admin (broker/share_group_offsets.py) goes the same way with
InitializeShareGroupState (83), DeleteShareGroupState (86) and ReadShareGroupStateSummary
(87), as Kafka's GroupCoordinatorService does through its persister. NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and a lost connection are retried,
against the leader the metadata names then, until `request.timeout.ms`; fencing errors
(FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH) are answered as they are.

Writes of one share-partition to a remote coordinator are sent one at a time, in order (a
later ShareUpdate wins offset by offset), so "every write so far is committed" is "no write
of it is in flight".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.broker_connection import BrokerConnections, ConnectionLost
from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.protocol.entities import make
from kafkalite.security.inter_broker import InterBrokerSecurity
from kafkalite.share.share_partition import StateBatch
from kafkalite.share.share_records import SharePartitionKey, ShareState, delivery_complete_count

if TYPE_CHECKING:
    from kafkalite.broker.share_coordinator_service import ShareCoordinatorService

log = logging.getLogger("kafkalite.share")

INITIALIZE_SHARE_GROUP_STATE, READ_SHARE_GROUP_STATE, WRITE_SHARE_GROUP_STATE = 83, 84, 85
DELETE_SHARE_GROUP_STATE, READ_SHARE_GROUP_STATE_SUMMARY = 86, 87
SUMMARY_VERSION = 1  # with the delivery complete count (the lag needs it)
WRITE_VERSION = 1
RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.request_timed_out,
        ErrorCode.network_exception,
    }
)
RETRY_BACKOFF_S = 0.05
UNINITIALIZED = -1  # ReadShareGroupState's start offset of a share-partition without state


def _module(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def read_request(key: SharePartitionKey, leader_epoch: int) -> Any:
    m = _module(READ_SHARE_GROUP_STATE, 0)
    partition = make(m.PartitionData, partition=key.partition, leader_epoch=leader_epoch)
    topic = make(m.ReadStateData, topic_id=key.topic_id, partitions=(partition,))
    return make(m.ReadShareGroupStateRequest, group_id=key.group_id, topics=(topic,))


def write_request(
    key: SharePartitionKey,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: list[StateBatch],
) -> Any:
    m = _module(WRITE_SHARE_GROUP_STATE, WRITE_VERSION)
    partition = make(
        m.PartitionData,
        partition=key.partition,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        state_batches=tuple(
            make(
                m.StateBatch,
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=b.delivery_state,
                delivery_count=b.delivery_count,
            )
            for b in batches
        ),
    )
    topic = make(m.WriteStateData, topic_id=key.topic_id, partitions=(partition,))
    return make(m.WriteShareGroupStateRequest, group_id=key.group_id, topics=(topic,))


def initialize_request(key: SharePartitionKey, start_offset: int) -> Any:
    """The state epoch is left unchecked (-1): the share coordinator takes the next one."""
    m = _module(INITIALIZE_SHARE_GROUP_STATE, 0)
    partition = make(
        m.PartitionData, partition=key.partition, state_epoch=-1, start_offset=start_offset
    )
    topic = make(m.InitializeStateData, topic_id=key.topic_id, partitions=(partition,))
    return make(m.InitializeShareGroupStateRequest, group_id=key.group_id, topics=(topic,))


def delete_request(key: SharePartitionKey) -> Any:
    m = _module(DELETE_SHARE_GROUP_STATE, 0)
    partition = make(m.PartitionData, partition=key.partition)
    topic = make(m.DeleteStateData, topic_id=key.topic_id, partitions=(partition,))
    return make(m.DeleteShareGroupStateRequest, group_id=key.group_id, topics=(topic,))


def summary_request(key: SharePartitionKey) -> Any:
    m = _module(READ_SHARE_GROUP_STATE_SUMMARY, SUMMARY_VERSION)
    partition = make(m.PartitionData, partition=key.partition, leader_epoch=-1)
    topic = make(m.ReadStateSummaryData, topic_id=key.topic_id, partitions=(partition,))
    return make(m.ReadShareGroupStateSummaryRequest, group_id=key.group_id, topics=(topic,))


@dataclass(frozen=True, slots=True)
class StateSummary:
    """What DescribeShareGroupOffsets shows of a share-partition (Kafka's
    PartitionStateSummaryData)."""

    start_offset: int
    leader_epoch: int
    delivery_complete_count: int


def summary_of(state: ShareState) -> StateSummary:
    return StateSummary(state.start_offset, state.leader_epoch, delivery_complete_count(state))


def _only_partition(response: Any) -> Any:
    return response.results[0].partitions[0]


def read_answer(response: Any) -> tuple[ErrorCode, ShareState | None]:
    result = _only_partition(response)
    error = ErrorCode(result.error_code)
    if error is not ErrorCode.none or result.start_offset == UNINITIALIZED:
        return error, None
    batches = tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in result.state_batches
    )
    return ErrorCode.none, ShareState(0, result.state_epoch, -1, result.start_offset, batches)


@dataclass(eq=False)
class SharePersister:
    coordinator: ShareCoordinatorService  # this broker's share coordinator
    broker_id: int
    leader_of: Callable[[int], int]  # state partition -> its leader (-1: none)
    endpoint_of: Callable[[int], Endpoint | None]
    request_timeout_ms: int = 30_000
    security: InterBrokerSecurity | None = None
    _connections: BrokerConnections = field(init=False)
    _connection_locks: dict[int, trio.Lock] = field(default_factory=dict)
    # Per share-partition written remotely: its writes go one at a time, in order.
    _write_locks: dict[SharePartitionKey, trio.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._connections = BrokerConnections(
            self.endpoint_of, f"broker-{self.broker_id}-share-persister", self.security
        )

    def no_state_yet(self) -> bool:
        """`__share_group_state` does not exist: no share-partition has state anywhere (the
        admin reads then answer at once, without creating it)."""
        runtime = self.coordinator.runtime
        return runtime.topic not in runtime.replica_manager.metadata.topics

    def is_local(self, key: SharePartitionKey) -> bool:
        return self.coordinator.runtime.check(key.coordinator_key()) is ErrorCode.none

    async def read_state(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[ErrorCode, ShareState | None]:
        """The persisted state (None: never initialized), or why it cannot be read."""
        if not self.is_local(key):
            error, response = await self._send(key, read_request(key, leader_epoch))
            if response is not None:
                return read_answer(response)
            if not self.is_local(key):  # else the state partition moved here meanwhile
                return error, None
        return await self.coordinator.read_state_for_leader(key, leader_epoch)

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> ErrorCode:
        """NONE once the changes are committed in `__share_group_state`."""
        if self.is_local(key) and key not in self._write_locks:
            return await self.coordinator.write_state(
                key, leader_epoch, start_offset, batches, state_epoch
            )
        request = write_request(key, state_epoch, leader_epoch, start_offset, batches)
        lock = self._write_locks.setdefault(key, trio.Lock())
        async with lock:
            error, response = await self._send(key, request)
            if response is None and self.is_local(key):  # moved here meanwhile
                error = await self.coordinator.write_state(
                    key, leader_epoch, start_offset, batches, state_epoch
                )
        if not lock.locked() and lock.statistics().tasks_waiting == 0:
            del self._write_locks[key]  # none in flight: local writes may go direct again
        return error if response is None else ErrorCode(_only_partition(response).error_code)

    async def read_summary(self, key: SharePartitionKey) -> tuple[ErrorCode, StateSummary | None]:
        """The share-partition's start offset, leader epoch and delivery complete count
        (None: never initialized), or why they cannot be read (Kafka's readSummary)."""
        if self.no_state_yet():
            return ErrorCode.none, None
        if not self.is_local(key):
            error, response = await self._send(key, summary_request(key))
            if response is not None:
                result = _only_partition(response)
                error = ErrorCode(result.error_code)
                if error is not ErrorCode.none or result.start_offset == UNINITIALIZED:
                    return error, None
                summary = StateSummary(
                    result.start_offset, result.leader_epoch, result.delivery_complete_count
                )
                return ErrorCode.none, summary
            if not self.is_local(key):
                return error, None
        error, state = self.coordinator.read_state(key)
        return error, None if state is None else summary_of(state)

    async def initialize_state(self, key: SharePartitionKey, start_offset: int) -> ErrorCode:
        """Start the share-partition afresh at `start_offset`, a new state epoch with nothing
        in flight (Kafka's initializeState, as AlterShareGroupOffsets uses it)."""
        if not self.is_local(key):
            error, response = await self._send(key, initialize_request(key, start_offset))
            if response is not None:
                return ErrorCode(_only_partition(response).error_code)
            if not self.is_local(key):
                return error
        return await self.coordinator.initialize_state(key, start_offset)

    async def delete_state(self, keys: list[SharePartitionKey]) -> ErrorCode:
        """Forget these share-partitions' state, wherever it is kept (Kafka's deleteState);
        the first error, if any."""
        if self.no_state_yet():
            return ErrorCode.none
        local = [key for key in keys if self.is_local(key)]
        first = ErrorCode.none
        for key in keys:
            if key in local:
                continue
            error, response = await self._send(key, delete_request(key))
            if response is not None:
                error = ErrorCode(_only_partition(response).error_code)
            elif self.is_local(key):  # moved here meanwhile
                local.append(key)
                continue
            if first is ErrorCode.none:
                first = error
        present = [key for key in local if key in self.coordinator.states]
        error = await self.coordinator.delete_state(present) if present else ErrorCode.none
        return first if first is not ErrorCode.none else error

    async def committed(self, key: SharePartitionKey) -> ErrorCode:
        """NONE once every write of the share-partition so far is committed."""
        lock = self._write_locks.get(key)
        if lock is not None:  # remote writes are answered once committed: wait for them
            async with lock:
                pass
        if not self.is_local(key):
            return ErrorCode.none
        index = self.coordinator.partition_of(key)
        failed = await self.coordinator.runtime.committed([index], self.request_timeout_ms)
        return failed.get(index, ErrorCode.none)

    async def _send(self, key: SharePartitionKey, request: Any) -> tuple[ErrorCode, Any]:
        """The coordinator's answer, retried while it is moving or loading; or the error
        once the request timeout passed (answered locally if the state partition moved
        here meanwhile)."""
        error = ErrorCode.coordinator_not_available
        with trio.move_on_after(self.request_timeout_ms / 1000):
            while True:
                leader = self.leader_of(self.coordinator.partition_of(key))
                if leader == self.broker_id or leader < 0:
                    error = self.coordinator.runtime.check(key.coordinator_key())
                    if error is ErrorCode.none:  # moved here: the caller answers locally
                        return error, None
                else:
                    error, response = await self.request(leader, request)
                    if response is not None:
                        answer = ErrorCode(_only_partition(response).error_code)
                        if answer not in RETRIABLE:
                            return ErrorCode.none, response
                        error = answer
                await trio.sleep(RETRY_BACKOFF_S)
        log.info("share state of %s: %s", key, error.name)
        return error, None

    async def request(self, broker_id: int, request: Any) -> tuple[ErrorCode, Any]:
        """One request to another broker (also the group coordinator's ListOffsets for a
        share group's lag, broker/partition_metadata_client.py)."""
        lock = self._connection_locks.setdefault(broker_id, trio.Lock())
        try:
            async with lock:
                connection = await self._connections.get(broker_id)
                return ErrorCode.none, await connection.request(request)
        except ConnectionLost as exc:
            log.info("share state request to broker %d: %s", broker_id, exc)
            await self._connections.drop(broker_id)
            return ErrorCode.network_exception, None
        except BaseException:  # cancelled mid-request: its answer would come to the next one
            await self._connections.drop(broker_id)
            raise

    async def close(self) -> None:
        await self._connections.close_all()
