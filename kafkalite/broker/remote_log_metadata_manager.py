"""The remote segment lists of a cluster, replicated through `__remote_log_metadata` (Kafka's
TopicBasedRemoteLogMetadataManager).

Each user partition's list lives in one partition of the topic (remote_log_metadata_topic.py
picks it, as Kafka's RemoteLogMetadataTopicPartitioner). Every broker consumes the metadata
partitions of the tiered partitions it hosts, leader or follower, from their leaders (a
consumer's Fetch over broker_connection.py) and replays every record into the same
`RemoteLogSegments` state, which the partition's log uses as its `remote`. So:
* the leader's RemoteLogManager writes each state change (COPY_SEGMENT_STARTED, ...FINISHED,
  DELETE_...) with acks=all and counts it done only once it has consumed it back (Kafka's
  waitTillConsumptionCatchesUp): an acknowledged change survives the loss of any broker;
* a new leader continues from the copied end it consumed: it copies nothing twice and serves
  and expires every copied segment; it waits (`ready`) until it has read its metadata
  partition to the end after its election;
* a follower deletes a local segment only once its list says it is copied;
* every record carries the writing leader's epoch, and the replay ignores those of an epoch
  older than one already replayed (storage/remote/metadata.py): a deposed leader that is
  still running (paused, or cut off from ZooKeeper) changes nothing once the new leader
  wrote its first record (its epoch, as soon as it is `ready`). The leader applies its own
  changes only as it consumes them, as every other broker does: the same records, the same
  list everywhere.
The remote log start (DeleteRecords, retention) is written by the log synchronously: it goes
through an outbox, published by the leader on the next round.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.broker_connection import BrokerConnections, ConnectionLost
from kafkalite.broker.remote_log_metadata_topic import (
    METADATA_TOPIC,
    UserPartition,
    decode,
    encode,
    metadata_partition,
)
from kafkalite.config import BrokerConfig
from kafkalite.protocol.entities import make
from kafkalite.security.inter_broker import InterBrokerSecurity
from kafkalite.storage.batch import iter_batches
from kafkalite.storage.records import decode_records, encode_batch
from kafkalite.storage.remote.metadata import METADATA_FILE, RemoteLogSegments, stamped
from kafkalite.storage.remote.s3_storage import RemoteStorageError

if TYPE_CHECKING:
    from kafkalite.broker.cluster_metadata import Endpoint
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager

log = logging.getLogger("kafkalite.remote")

PRODUCE_API_KEY, PRODUCE_VERSION = 0, 9
FETCH_API_KEY, FETCH_VERSION = 1, 16
CONSUMER_REPLICA_ID = -1
FETCH_MAX_WAIT_MS = 100
FETCH_MAX_BYTES = 1 << 20
ROUND_PAUSE_S = 0.05
FAILURE_PAUSE_S = 1.0
# Kafka's rlmm.config.* names (their defaults: 50 partitions, replication factor 3).
NUM_PARTITIONS = "rlmm.config.remote.log.metadata.topic.num.partitions"
REPLICATION_FACTOR = "rlmm.config.remote.log.metadata.topic.replication.factor"
CONSUME_WAIT_MS = "rlmm.config.remote.log.metadata.consume.wait.ms"
TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1"}


class RemoteLogMetadataError(RemoteStorageError):
    """A state change could not be made durable in the metadata topic (retried next run)."""


@dataclass(eq=False)
class TopicBasedRemoteLogMetadataManager:
    config: BrokerConfig
    replica_manager: ReplicaManager
    endpoint_of: Callable[[int], Endpoint | None]
    clock_ms: Callable[[], int]
    security: InterBrokerSecurity | None = None  # the inter-broker listener's TLS and login
    states: dict[UserPartition, RemoteLogSegments] = field(default_factory=dict)
    # Metadata partitions consumed: the next offset to read, and how many fetches found
    # them read to their high watermark.
    positions: dict[int, int] = field(default_factory=dict)
    caught_up: dict[int, int] = field(default_factory=dict)
    _leading: dict[UserPartition, tuple[int, int]] = field(default_factory=dict)
    _outbox: list[tuple[UserPartition, list[dict[str, object]]]] = field(default_factory=list)
    _progress: trio.Event = field(default_factory=trio.Event)
    _produce_lock: trio.Lock = field(default_factory=trio.Lock)
    _producer: BrokerConnections = field(init=False)
    _consumers: BrokerConnections = field(init=False)
    _create_failure: str = ""
    _failure: str = ""  # the last round's failure, logged once

    def __post_init__(self) -> None:
        broker = self.config.broker_id
        self._producer = BrokerConnections(
            self.endpoint_of, f"broker-{broker}-rlmm-producer", self.security
        )
        self._consumers = BrokerConnections(
            self.endpoint_of, f"broker-{broker}-rlmm-consumer", self.security
        )

    @property
    def num_partitions(self) -> int:
        topic = self.replica_manager.metadata.topics.get(METADATA_TOPIC)
        return topic.num_partitions if topic is not None else self.config.int(NUM_PARTITIONS)

    def metadata_partition(self, user: UserPartition) -> int:
        return metadata_partition(user, self.num_partitions)

    @staticmethod
    def user(partition: Partition) -> UserPartition:
        return partition.topic_id, partition.index

    # -- the topic -------------------------------------------------------------------------

    def ensure_topic(self) -> bool:
        """Create the topic on first use (any broker may: the first one wins)."""
        if METADATA_TOPIC in self.replica_manager.metadata.topics:
            return True
        outcome, _ = self.replica_manager.create_topic(
            METADATA_TOPIC,
            self.config.int(NUM_PARTITIONS),
            self.config.int(REPLICATION_FACTOR),
            TOPIC_CONFIGS,
        )
        if outcome.ok or outcome.error is ErrorCode.topic_already_exists:
            log.info("%s created", METADATA_TOPIC)
            return METADATA_TOPIC in self.replica_manager.metadata.topics
        reason = outcome.message or outcome.error.name
        if reason != self._create_failure:  # said once, not every round
            log.warning("cannot create %s yet: %s", METADATA_TOPIC, reason)
        self._create_failure = reason
        return False

    # -- the hosted partitions -------------------------------------------------------------

    def attach(self) -> None:
        """Give every hosted tiered partition its replicated list as its log's `remote`, and
        consume the metadata partitions they are in."""
        for topic in list(self.replica_manager.topics.values()):
            for partition in list(topic.partitions.values()):
                if partition.topic == METADATA_TOPIC:
                    continue
                if partition.log.config.remote_storage_enable:
                    self._attach(partition)

    def _attach(self, partition: Partition) -> None:
        user = self.user(partition)
        state = self._state(user)
        state.path = partition.log.dir / METADATA_FILE  # where DeleteTopics snapshots it
        state.sink = partial(self._enqueue, user)
        if partition.log.remote is not state:
            partition.log.remote = state
        index = self.metadata_partition(user)
        if index not in self.positions:
            self.positions[index] = 0
            self.caught_up[index] = 0

    def _state(self, user: UserPartition) -> RemoteLogSegments:
        state = self.states.get(user)
        if state is None:
            state = self.states[user] = RemoteLogSegments(Path(METADATA_FILE))
        return state

    def ready(self, partition: Partition) -> bool:
        """The leader may act on the list: it is the log's, and the metadata partition was
        read to its end by a fetch sent after this leader epoch was first seen here."""
        user = self.user(partition)
        if self.states.get(user) is not partition.log.remote or partition.log.remote is None:
            return False
        index = self.metadata_partition(user)
        seen = self._leading.get(user)
        if seen is None or seen[0] != partition.leader_epoch:
            # +2: a fetch in flight now may have been sent before the election.
            seen = self._leading[user] = (partition.leader_epoch, self.caught_up[index] + 2)
        return self.caught_up[index] >= seen[1]

    # -- writing ---------------------------------------------------------------------------

    def _enqueue(self, user: UserPartition, records: list[dict[str, object]]) -> None:
        self._outbox.append((user, records))

    async def publish(self, user: UserPartition, records: list[dict[str, object]]) -> None:
        """Write `records` with acks=all and wait until this broker has consumed them."""
        index = self.metadata_partition(user)
        state = self.replica_manager.metadata.partition_state(METADATA_TOPIC, index)
        if state is None or state.leader < 0:
            raise RemoteLogMetadataError(f"{METADATA_TOPIC}-{index} has no leader")
        batch = encode_batch([encode(user, r) for r in records], timestamp=self.clock_ms())
        module: Any = load_payload_module(PRODUCE_API_KEY, PRODUCE_VERSION, EntityType.request)
        request = make(
            module.ProduceRequest,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(milliseconds=self.config.int("request.timeout.ms")),
            topic_data=(
                make(
                    module.TopicProduceData,
                    name=METADATA_TOPIC,
                    partition_data=(make(module.PartitionProduceData, index=index, records=batch),),
                ),
            ),
        )
        async with self._produce_lock:
            try:
                connection = await self._producer.get(state.leader)
                response = await connection.request(request)
            except ConnectionLost as exc:
                await self._producer.drop(state.leader)
                raise RemoteLogMetadataError(f"{METADATA_TOPIC}-{index}: {exc}") from exc
        answer = response.responses[0].partition_responses[0]
        error = ErrorCode(answer.error_code)
        if error is not ErrorCode.none:
            raise RemoteLogMetadataError(f"{METADATA_TOPIC}-{index}: {error.name}")
        await self._wait_consumed(index, answer.base_offset + len(records))

    async def _wait_consumed(self, index: int, end: int) -> None:
        with trio.move_on_after(self.config.int(CONSUME_WAIT_MS) / 1000):
            while self.positions.get(index, 0) < end:
                await self._progress.wait()
            return
        raise RemoteLogMetadataError(f"{METADATA_TOPIC}-{index}: not consumed up to {end}")

    async def _flush_outbox(self) -> None:
        """Publish the log's own changes (the remote log start) of partitions led here."""
        while self._outbox:
            user, records = self._outbox[0]
            topic = self.replica_manager.metadata.topic_by_id(user[0])
            partition = self.replica_manager.partition(topic.name, user[1]) if topic else None
            if partition is not None and partition.is_leader:
                await self.publish(user, stamped(records, partition.leader_epoch))
            self._outbox.pop(0)

    # -- consuming -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                pause = ROUND_PAUSE_S
                try:
                    if self.ensure_topic():
                        self.attach()
                        await self._fetch_round()
                        await self._flush_outbox()
                    self._failure = ""
                except RemoteStorageError as exc:
                    if str(exc) != self._failure:  # said once, not every round
                        log.warning("remote log metadata: %s (retrying)", exc)
                    self._failure = str(exc)
                    pause = FAILURE_PAUSE_S
                except Exception:
                    log.exception("remote log metadata round failed")
                    pause = FAILURE_PAUSE_S
                await trio.sleep(pause)
        finally:
            await self._producer.close_all()
            await self._consumers.close_all()

    async def _fetch_round(self) -> None:
        by_leader: dict[int, list[int]] = {}
        for index in self.positions:
            state = self.replica_manager.metadata.partition_state(METADATA_TOPIC, index)
            if state is not None and state.leader >= 0:
                by_leader.setdefault(state.leader, []).append(index)
        async with trio.open_nursery() as nursery:
            for leader, indexes in by_leader.items():
                nursery.start_soon(self._fetch_from, leader, indexes)

    async def _fetch_from(self, leader: int, indexes: list[int]) -> None:
        topic = self.replica_manager.metadata.topics[METADATA_TOPIC]
        module: Any = load_payload_module(FETCH_API_KEY, FETCH_VERSION, EntityType.request)
        entries = tuple(
            make(
                module.FetchPartition,
                partition=index,
                current_leader_epoch=-1,
                fetch_offset=self.positions[index],
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=FETCH_MAX_BYTES,
            )
            for index in indexes
        )
        consumer = make(module.ReplicaState, replica_id=CONSUMER_REPLICA_ID, replica_epoch=-1)
        request = make(
            module.FetchRequest,
            cluster_id=None,
            replica_state=consumer,
            max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS),
            min_bytes=1,
            max_bytes=FETCH_MAX_BYTES * len(indexes),
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(make(module.FetchTopic, topic_id=topic.topic_id, partitions=entries),),
            forgotten_topics_data=(),
            rack_id="",
        )
        try:
            connection = await self._consumers.get(leader)
            response = await connection.request(request)
        except ConnectionLost:
            await self._consumers.drop(leader)
            return
        for topic_response in response.responses:
            for data in topic_response.partitions:
                self._consume(data)

    def _consume(self, data: Any) -> None:
        index = data.partition_index
        if ErrorCode(data.error_code) is not ErrorCode.none or index not in self.positions:
            return
        records = bytes(data.records or b"")
        for position, header in iter_batches(records):
            if header.next_offset <= self.positions[index]:
                continue  # already consumed (a fetch overlapping the one before)
            batch = memoryview(records)[position : position + header.size]
            for record in decode_records(batch):
                decoded = decode(record.value or b"")
                if decoded is not None and record.offset >= self.positions[index]:
                    user, change = decoded
                    self._state(user).apply([change])
            self.positions[index] = header.next_offset
        if self.positions[index] >= data.high_watermark:
            self.caught_up[index] += 1
        self._progress.set()
        self._progress = trio.Event()
