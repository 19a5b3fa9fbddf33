"""Followers pull from their leader (Kafka's ReplicaFetcherThread / AbstractFetcherThread).

One `ReplicaFetcher` per (leader broker, fetcher index) sends Fetch requests as a replica
(ReplicaState: this broker's id, broker epoch -1) for every partition it follows there, with
each partition's log end as fetch offset and its latest epoch as last_fetched_epoch, so the
leader answers a diverging epoch instead of records when the logs differ. The leader's
batches are appended unchanged, the high watermark is taken from the answer, and a diverging
epoch truncates the log by leader epoch (never by high watermark alone).

The decisions (`fetch_request`, `apply_partition_response`) are sans-IO; `ReplicaFetcher.run`
is the trio task around them. NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH park a
partition until the metadata brings its next state (the manager then re-adds it);
OFFSET_OUT_OF_RANGE asks the leader (ListOffsets earliest, as a replica) where its log starts
(across tiers) and starts over there when this log ends before it (Kafka's
fetchOffsetAndTruncate); OFFSET_MOVED_TO_TIERED_STORAGE (a tiered leader's local log starts
after this log's end, also the next answer after starting over in its remote tier) asks for
its earliest local offset and rebuilds this log's start, leader epochs and producer state
there from the remote tier (`build_remote_log_aux_state`, Kafka's
ReplicaFetcherTierStateMachine); other errors and a lost connection back off for
replica.fetch.backoff.ms.
"""

from __future__ import annotations

import datetime
import enum
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.broker_connection import BrokerConnection, ConnectionLost
from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.broker.delayed import TopicPartition
from kafkalite.broker.partition import EARLIEST, EARLIEST_LOCAL, Partition
from kafkalite.protocol.entities import make
from kafkalite.security.inter_broker import InterBrokerSecurity
from kafkalite.storage.errors import StorageError

log = logging.getLogger("kafkalite.replica_fetcher")

FETCH_API_KEY = 1
FETCH_VERSION = 16  # Kafka's inter-broker Fetch: topic ids, ReplicaState, diverging epochs
NO_BROKER_EPOCH = -1
LIST_OFFSETS_API_KEY = 2
LIST_OFFSETS_VERSION = 8  # the first with earliest-local (-4)
AWAIT_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """replica.fetch.* for one broker."""

    broker_id: int
    max_bytes: int
    wait_max_ms: int
    min_bytes: int
    backoff_ms: int
    socket_timeout_ms: int = 30_000  # an unanswered request: the connection is given up
    security: InterBrokerSecurity | None = None  # TLS, SASL login to the other brokers


class Outcome(enum.Enum):
    FETCHED = "fetched"  # appended (maybe nothing): fetch again at once
    TRUNCATED = "truncated"  # diverged: truncated, fetch again with the new last epoch
    BACK_OFF = "back off"  # retriable: try again after replica.fetch.backoff.ms
    AWAIT_STATE = "await state"  # the leader moved on: wait for the metadata's next state
    OUT_OF_RANGE = "out of range"  # ask the leader where its log starts
    MOVED_TO_TIERED = "moved to tiered"  # rebuild from the remote tier at its local start


# A follower's rebuild from the remote tier at the leader's local log start: False to retry.
BuildAuxState = Callable[[Partition, int], Awaitable[bool]]


def fetch_partition_entry(partition: Partition, max_bytes: int) -> dict[str, Any]:
    """One partition of a follower's Fetch: from its own log end, with its latest epoch."""
    cache = partition.log.leader_epoch_cache
    return {
        "partition": partition.index,
        "current_leader_epoch": partition.leader_epoch,
        "fetch_offset": partition.log_end_offset,
        "last_fetched_epoch": cache.latest_epoch,
        "log_start_offset": partition.log_start_offset,
        "partition_max_bytes": max_bytes,
    }


def fetch_request(partitions: list[Partition], settings: FetchSettings) -> Any:
    """The Fetch request for `partitions` (a full fetch: no session)."""
    module: Any = load_payload_module(FETCH_API_KEY, FETCH_VERSION, EntityType.request)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for partition in partitions:
        entry = fetch_partition_entry(partition, settings.max_bytes)
        by_topic.setdefault(partition.topic_id, []).append(make(module.FetchPartition, **entry))
    topics = tuple(
        make(module.FetchTopic, topic_id=topic_id, partitions=tuple(entries))
        for topic_id, entries in by_topic.items()
    )
    return make(
        module.FetchRequest,
        cluster_id=None,
        replica_state=make(
            module.ReplicaState, replica_id=settings.broker_id, replica_epoch=NO_BROKER_EPOCH
        ),
        max_wait=datetime.timedelta(milliseconds=settings.wait_max_ms),
        min_bytes=settings.min_bytes,
        max_bytes=settings.max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=topics,
        forgotten_topics_data=(),
        rack_id="",
    )


def apply_partition_response(partition: Partition, data: Any, now_ms: int) -> Outcome:
    """Kafka's processFetchRequest for one partition: append, learn the high watermark, or
    truncate to where the logs agree."""
    error = ErrorCode(data.error_code)
    if error in AWAIT_ERRORS:
        return Outcome.AWAIT_STATE
    if error is ErrorCode.offset_out_of_range:
        return Outcome.OUT_OF_RANGE
    if error is ErrorCode.offset_moved_to_tiered_storage:
        return Outcome.MOVED_TO_TIERED
    if error in (ErrorCode.topic_authorization_failed, ErrorCode.cluster_authorization_failed):
        log.error(  # an operator's to fix, as Kafka's fetcher logs it
            "%s-%d: the leader refuses this broker's fetch (%s): the broker's principal on the"
            " inter-broker listener needs ClusterAction on the cluster",
            partition.topic,
            partition.index,
            error.name,
        )
        return Outcome.BACK_OFF
    if error is not ErrorCode.none:
        log.info("%s-%d: fetch answered %s", partition.topic, partition.index, error.name)
        return Outcome.BACK_OFF
    diverging = data.diverging_epoch
    if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0:
        offset, _ = partition.truncation_offset(diverging.epoch, diverging.end_offset)
        log.info(
            "%s-%d: diverging from the leader at epoch %d (ends at %d): truncating %d -> %d",
            partition.topic,
            partition.index,
            diverging.epoch,
            diverging.end_offset,
            partition.log_end_offset,
            offset,
        )
        partition.truncate_to(offset)
        return Outcome.TRUNCATED
    if data.records:
        appended = partition.append_records_to_follower(bytes(data.records), now_ms)
        if isinstance(appended, StorageError) or appended is not ErrorCode.none:
            log.warning(
                "%s-%d: follower append failed: %s", partition.topic, partition.index, appended
            )
            return Outcome.BACK_OFF
    partition.update_follower_high_watermark(data.high_watermark)
    partition.maybe_increment_log_start_offset(data.log_start_offset)
    return Outcome.FETCHED


def earliest_offsets_request(
    partitions: list[Partition], broker_id: int, timestamp: int = EARLIEST
) -> Any:
    """ListOffsets for the leader's log start (EARLIEST_LOCAL: its local log start) of
    `partitions`, as a replica."""
    module: Any = load_payload_module(
        LIST_OFFSETS_API_KEY, LIST_OFFSETS_VERSION, EntityType.request
    )
    by_topic: dict[str, list[Any]] = {}
    for partition in partitions:
        entry = make(
            module.ListOffsetsPartition,
            partition_index=partition.index,
            current_leader_epoch=partition.leader_epoch,
            timestamp=timestamp,
        )
        by_topic.setdefault(partition.topic, []).append(entry)
    topics = tuple(
        make(module.ListOffsetsTopic, name=name, partitions=tuple(entries))
        for name, entries in by_topic.items()
    )
    return make(module.ListOffsetsRequest, replica_id=broker_id, isolation_level=0, topics=topics)


def reset_out_of_range(partition: Partition, error: ErrorCode, leader_start: int) -> Outcome:
    """Kafka's fetchOffsetAndTruncate, for a follower behind its leader's log start: start
    empty there. Otherwise (the leader's log ends before this one, which only an unclean
    election leaves) back off: the diverging-epoch check truncates on the next fetch."""
    if error is not ErrorCode.none:
        return Outcome.AWAIT_STATE if error in AWAIT_ERRORS else Outcome.BACK_OFF
    if leader_start > partition.log_end_offset:
        log.info(
            "%s-%d: log end %d is before the leader's log start %d: starting over there",
            partition.topic,
            partition.index,
            partition.log_end_offset,
            leader_start,
        )
        partition.truncate_fully_and_start_at(leader_start)
        return Outcome.TRUNCATED
    return Outcome.BACK_OFF


@dataclass(slots=True)
class FetchState:
    """A partition this fetcher follows (Kafka's PartitionFetchState)."""

    partition: Partition
    leader_epoch: int
    delayed_until: float = 0.0  # trio time; backing off until then
    awaiting_state: bool = False


class ReplicaFetcher:
    """The trio task fetching every partition it follows from one leader broker."""

    def __init__(
        self,
        source_broker: int,
        settings: FetchSettings,
        endpoint_of: Callable[[int], Endpoint | None],
        clock_ms: Callable[[], int],
        on_progress: Callable[[list[TopicPartition]], None],
        build_aux_state: BuildAuxState | None = None,
    ) -> None:
        self.source_broker = source_broker
        self._build_aux_state = build_aux_state  # None: not tiered here, start empty
        self.settings = settings
        self._endpoint_of = endpoint_of
        self._clock_ms = clock_ms
        self._on_progress = on_progress
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._wakeup = trio.Event()
        self._connection: BrokerConnection | None = None

    # -- membership (called synchronously by the manager) -----------------------------------

    def add(self, partition: Partition) -> None:
        tp = (partition.topic, partition.index)
        self.partitions[tp] = FetchState(partition, partition.leader_epoch)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    # -- the task ---------------------------------------------------------------------------

    def _ready(self) -> list[FetchState]:
        now = trio.current_time()
        return [
            s for s in self.partitions.values() if not s.awaiting_state and s.delayed_until <= now
        ]

    async def _wait_for_work(self) -> None:
        pending = [s.delayed_until for s in self.partitions.values() if not s.awaiting_state]
        self._wakeup = trio.Event()
        with trio.move_on_at(min(pending, default=float("inf"))):
            await self._wakeup.wait()

    async def run(self) -> None:
        try:
            while True:
                ready = self._ready()
                if not ready:
                    await self._wait_for_work()
                    continue
                await self._fetch_once(ready)
        finally:
            await self._close()

    async def _close(self) -> None:
        if self._connection is not None:
            with trio.CancelScope(shield=True):
                await self._connection.aclose()
            self._connection = None

    def _back_off(self, states: list[FetchState]) -> None:
        until = trio.current_time() + self.settings.backoff_ms / 1000
        for state in states:
            state.delayed_until = until

    async def _connect(self) -> BrokerConnection | None:
        if self._connection is None:
            endpoint = self._endpoint_of(self.source_broker)
            if endpoint is None:
                return None
            client_id = f"broker-{self.settings.broker_id}-fetcher"
            self._connection = await BrokerConnection.open(
                endpoint.host, endpoint.port, client_id, self.settings.security
            )
        return self._connection

    async def _fetch_once(self, ready: list[FetchState]) -> None:
        epochs = {(s.partition.topic, s.partition.index): s.leader_epoch for s in ready}
        request = fetch_request([s.partition for s in ready], self.settings)
        try:
            connection = await self._connect()
            if connection is None:
                self._back_off(ready)
                return
            response = await self._request(connection, request)
        except ConnectionLost as exc:
            log.info("fetching from broker %d: %s", self.source_broker, exc)
            await self._close()
            self._back_off(ready)
            return
        if response.error_code != ErrorCode.none:
            self._back_off(ready)
            return
        progressed, out_of_range, moved = self._apply(response, epochs)
        if out_of_range:
            await self._reset_out_of_range(connection, out_of_range)
        if moved:
            await self._reset_out_of_range(connection, moved, tiered=True)
        self._on_progress(progressed)

    async def _reset_out_of_range(
        self, connection: BrokerConnection, states: list[FetchState], tiered: bool = False
    ) -> None:
        """Ask the leader where its log starts; start over there. When `tiered`, where its
        local log starts, and rebuild the state before it from the remote tier."""
        epochs = {(s.partition.topic, s.partition.index): s.leader_epoch for s in states}
        request = earliest_offsets_request(
            [s.partition for s in states],
            self.settings.broker_id,
            EARLIEST_LOCAL if tiered else EARLIEST,
        )
        try:
            response = await self._request(connection, request)
        except ConnectionLost:
            await self._close()
            self._back_off(states)
            return
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.name, answer.partition_index)
                state = self.partitions.get(tp)
                if state is None or epochs.get(tp) != state.leader_epoch:
                    continue
                error = ErrorCode(answer.error_code)
                if tiered and error is ErrorCode.none and self._build_aux_state is not None:
                    built = await self._build_aux_state(state.partition, answer.offset)
                    outcome = Outcome.TRUNCATED if built else Outcome.BACK_OFF
                else:
                    outcome = reset_out_of_range(state.partition, error, answer.offset)
                self._note(state, outcome)

    async def _request(self, connection: BrokerConnection, request: Any) -> Any:
        """A request answered within replica.socket.timeout.ms (a stopped leader whose
        connection stays open must not hold its followers forever)."""
        timeout_s = self.settings.socket_timeout_ms / 1000
        with trio.move_on_after(timeout_s if timeout_s >= 0 else float("inf")):
            return await connection.request(request)
        raise ConnectionLost(f"no answer within {self.settings.socket_timeout_ms} ms")

    def _note(self, state: FetchState, outcome: Outcome) -> None:
        if outcome is Outcome.AWAIT_STATE:
            state.awaiting_state = True
        elif outcome is Outcome.BACK_OFF:
            self._back_off([state])

    def _apply(
        self, response: Any, epochs: dict[TopicPartition, int]
    ) -> tuple[list[TopicPartition], list[FetchState], list[FetchState]]:
        done, out_of_range, moved = [], [], []
        now_ms = self._clock_ms()
        by_id = {s.partition.topic_id: s.partition.topic for s in self.partitions.values()}
        for topic in response.responses:
            name = by_id.get(topic.topic_id)
            for data in topic.partitions:
                tp = (name, data.partition_index) if name is not None else None
                state = self.partitions.get(tp) if tp is not None else None
                if tp is None or state is None or epochs.get(tp) != state.leader_epoch:
                    continue  # removed or re-added under a new epoch meanwhile
                outcome = apply_partition_response(state.partition, data, now_ms)
                if outcome is Outcome.OUT_OF_RANGE:
                    out_of_range.append(state)
                elif outcome is Outcome.MOVED_TO_TIERED:
                    moved.append(state)
                self._note(state, outcome)
                done.append(tp)
        return done, out_of_range, moved
