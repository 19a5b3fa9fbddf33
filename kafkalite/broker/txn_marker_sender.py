"""The transaction coordinator's markers to the leaders of its partitions (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

A transaction entering PrepareCommit/PrepareAbort needs one marker in each of its
partitions: once that state is committed, the transaction comes here as `PendingMarkers`,
whoever leads its partitions. Each round groups every pending (transaction, partition) by
the partition's current leader in the cluster metadata, writes those led here through the
same code as a WriteTxnMarkers request (broker/txn_marker_writer.py, acks=all) and sends
one WriteTxnMarkers request per other broker
(concurrently, one connection per broker). NONE (replicated: leaders append markers with
acks=all) removes the partition; NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost
connection or no leader keep it for the next round, to the leader the metadata names then
(after a 100 ms backoff); INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED cancel
the transaction's markers (a newer producer or coordinator owns it); a partition whose topic
is gone is dropped, as are those answering UNSUPPORTED_FOR_MESSAGE_FORMAT/UNSUPPORTED_VERSION.
A transaction whose partitions are all acknowledged is handed to `on_complete` (which
writes CompleteCommit/CompleteAbort).

Deciding (`route`, `write_txn_markers_request`, `apply_response`) is sans-IO; `run` is the
trio task around it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import trio
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.broker_connection import BrokerConnections, ConnectionLost
from kafkalite.broker.cluster_metadata import ClusterMetadata, Endpoint
from kafkalite.broker.delayed import TopicPartition
from kafkalite.broker.replica_fetcher_manager import inter_broker_endpoint
from kafkalite.broker.txn_marker_writer import TxnMarker, write_txn_markers
from kafkalite.protocol.entities import make
from kafkalite.security.inter_broker import InterBrokerSecurity, inter_broker_security
from kafkalite.txn.coordinator import MarkerJob, TransactionCoordinator, TxnState

if TYPE_CHECKING:
    from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.config import BrokerConfig

log = logging.getLogger("kafkalite.txn.markers")

WRITE_TXN_MARKERS_API_KEY = 27
WRITE_TXN_MARKERS_VERSION = 1
NO_LEADER = -1

RETRY_ERRORS = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
    }
)
CANCEL_ERRORS = frozenset(
    {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}
)
DROP_ERRORS = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})


@dataclass(eq=False)
class PendingMarkers:
    """One transaction's markers not yet acknowledged."""

    job: MarkerJob
    coordinator_epoch: int
    remaining: set[TopicPartition]
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return not self.remaining and not self.cancelled


Route = dict[int, list[tuple[PendingMarkers, TopicPartition]]]


def route(pending: Iterable[PendingMarkers], metadata: ClusterMetadata) -> Route:
    """Partitions by their leader's broker id; one without a leader now waits for the next
    round. A partition whose topic is gone needs no marker: it is removed here."""
    by_leader: Route = defaultdict(list)
    topics = metadata.topics
    for markers in pending:
        for tp in sorted(markers.remaining):
            if tp[0] not in topics:
                markers.remaining.discard(tp)
                continue
            state = metadata.partition_state(*tp)
            leader = NO_LEADER if state is None else state.leader
            if leader != NO_LEADER:
                by_leader[leader].append((markers, tp))
    return by_leader


def write_txn_markers_request(entries: list[tuple[PendingMarkers, TopicPartition]]) -> Any:
    """One WriteTxnMarkers request: a marker per transaction, naming its partitions."""
    module: Any = load_payload_module(
        WRITE_TXN_MARKERS_API_KEY, WRITE_TXN_MARKERS_VERSION, EntityType.request
    )
    by_txn: dict[int, tuple[PendingMarkers, dict[str, list[int]]]] = {}
    for markers, (topic, index) in entries:
        _, topics = by_txn.setdefault(id(markers), (markers, defaultdict(list)))
        topics[topic].append(index)
    return make(
        module.WriteTxnMarkersRequest,
        markers=tuple(
            make(
                module.WritableTxnMarker,
                producer_id=markers.job.producer_id,
                producer_epoch=markers.job.producer_epoch,
                transaction_result=markers.job.commit,
                topics=tuple(
                    make(module.WritableTxnMarkerTopic, name=name, partition_indexes=tuple(parts))
                    for name, parts in topics.items()
                ),
                coordinator_epoch=markers.coordinator_epoch,
            )
            for markers, topics in by_txn.values()
        ),
    )


def apply_partition_result(markers: PendingMarkers, tp: TopicPartition, error: ErrorCode) -> None:
    """One partition's answer (TransactionMarkerRequestCompletionHandler)."""
    if error is ErrorCode.none or error in DROP_ERRORS:
        markers.remaining.discard(tp)
    elif error in CANCEL_ERRORS:
        log.info(
            "marker of %s for %s: %s; cancelling its markers",
            markers.job.transactional_id,
            tp,
            error.name,
        )
        markers.cancelled = True
    elif error not in RETRY_ERRORS:
        log.error("marker of %s for %s: unexpected %s", markers.job.transactional_id, tp, error)
    # a retriable error: the partition stays for the next round, to its next leader


def apply_response(entries: list[tuple[PendingMarkers, TopicPartition]], response: Any) -> None:
    """A WriteTxnMarkers response: markers are answered by producer id (one transaction per
    producer id in a request, as in Kafka)."""
    errors: dict[tuple[int, TopicPartition], ErrorCode] = {}
    for marker in response.markers:
        for topic in marker.topics:
            for partition in topic.partitions:
                key = (marker.producer_id, (topic.name, partition.partition_index))
                errors[key] = ErrorCode(partition.error_code)
    for markers, tp in entries:
        error = errors.get((markers.job.producer_id, tp), ErrorCode.unknown_server_error)
        apply_partition_result(markers, tp, error)


WriteLocal = Callable[[MarkerJob, int, TopicPartition], Awaitable[ErrorCode]]


@dataclass(eq=False)
class TxnMarkerSender:
    broker_id: int
    metadata: ClusterMetadata
    endpoint_of: Callable[[int], Endpoint | None]
    write_local: WriteLocal  # a marker to a partition led here (in-process, acks=all)
    on_complete: Callable[[MarkerJob], None]  # every marker acknowledged
    is_current: Callable[[PendingMarkers], bool]  # still this coordinator's transaction
    retry_backoff_ms: int = 100  # between rounds while markers are pending
    request_timeout_ms: int = 30_000
    security: InterBrokerSecurity | None = None  # TLS, SASL login to the other brokers
    pending: list[PendingMarkers] = field(default_factory=list)
    _connections: BrokerConnections = field(init=False)
    _wakeup: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self._connections = BrokerConnections(
            self.endpoint_of, f"broker-{self.broker_id}-txn-markers", self.security
        )

    def add(
        self, job: MarkerJob, coordinator_epoch: int, partitions: Iterable[TopicPartition]
    ) -> None:
        self.pending.append(PendingMarkers(job, coordinator_epoch, set(partitions)))
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                if not self.pending:
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                await self.send_round()
                if self.pending:
                    with trio.move_on_after(self.retry_backoff_ms / 1000):
                        await self._wakeup.wait()
        finally:
            await self._connections.close_all()

    async def send_round(self) -> None:
        """Route every pending marker to its partition's leader once; complete what is done."""
        self.pending = [m for m in self.pending if not m.cancelled and self.is_current(m)]
        by_leader = route(self.pending, self.metadata)
        async with trio.open_nursery() as nursery:
            for broker_id, entries in by_leader.items():
                if broker_id == self.broker_id:
                    nursery.start_soon(self._write_here, entries)
                else:
                    nursery.start_soon(self._send, broker_id, entries)
        for markers in [m for m in self.pending if m.done]:
            self.pending.remove(markers)
            if self.is_current(markers):
                self.on_complete(markers.job)
        self.pending = [m for m in self.pending if not m.cancelled]

    async def _write_here(self, entries: list[tuple[PendingMarkers, TopicPartition]]) -> None:
        for markers, tp in entries:
            error = await self.write_local(markers.job, markers.coordinator_epoch, tp)
            apply_partition_result(markers, tp, error)

    async def _send(
        self, broker_id: int, entries: list[tuple[PendingMarkers, TopicPartition]]
    ) -> None:
        """The entries for one broker, a request at a time on its connection."""
        for batch in _one_txn_per_producer(entries):
            request = write_txn_markers_request(batch)
            try:
                connection = await self._connections.get(broker_id)
                with trio.fail_after(self.request_timeout_ms / 1000):
                    response = await connection.request(request)
            except (ConnectionLost, trio.TooSlowError) as exc:
                log.debug("markers to broker %d: %s; retrying", broker_id, exc)
                await self._connections.drop(broker_id)
                return
            apply_response(batch, response)


def _one_txn_per_producer(
    entries: list[tuple[PendingMarkers, TopicPartition]],
) -> list[list[tuple[PendingMarkers, TopicPartition]]]:
    """Split entries so no request holds two transactions of one producer id (answers are
    matched by producer id)."""
    batches: list[dict[int, PendingMarkers]] = []
    out: list[list[tuple[PendingMarkers, TopicPartition]]] = []
    for markers, tp in entries:
        pid = markers.job.producer_id
        for owners, batch in zip(batches, out, strict=True):
            if owners.setdefault(pid, markers) is markers:
                batch.append((markers, tp))
                break
        else:
            batches.append({pid: markers})
            out.append([(markers, tp)])
    return out


class MarkerOwner(Protocol):
    """What the channel needs of the transaction coordinator service (which imports this
    module, so it is described here rather than imported)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> ClusterMetadata: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def coordinator(self) -> TransactionCoordinator: ...
    @property
    def groups(self) -> GroupCoordinatorService: ...
    def markers_acknowledged(self, job: MarkerJob) -> None: ...
    def coordinator_epoch_for(self, transactional_id: str) -> int: ...


class MarkerChannel:
    """The transaction coordinator service's side of the sender (Kafka's
    TransactionMarkerChannelManager): every transaction's markers go through it, to the
    partitions led here as to those led elsewhere, and the transaction completes when the
    last is replicated."""

    def __init__(self, service: MarkerOwner) -> None:
        self.service = service
        config = service.config
        self.sender = TxnMarkerSender(
            config.broker_id,
            service.metadata,
            self.endpoint_of,
            self._write_local,
            service.markers_acknowledged,
            self._is_current,
            request_timeout_ms=config.int("request.timeout.ms"),
            security=inter_broker_security(config),
        )

    def send(self, job: MarkerJob, coordinator_epoch: int) -> None:
        self.sender.add(job, coordinator_epoch, job.partitions)

    def endpoint_of(self, broker_id: int) -> Endpoint | None:
        return inter_broker_endpoint(self.service.config, self.service.metadata, broker_id)

    async def _write_local(self, job: MarkerJob, epoch: int, tp: TopicPartition) -> ErrorCode:
        """What a WriteTxnMarkers to this broker does, without the request."""
        marker = TxnMarker(job.producer_id, job.producer_epoch, job.commit, epoch, (tp,))
        service = self.service
        errors = await write_txn_markers(
            service.replica_manager, service.groups, [marker], self.sender.request_timeout_ms
        )
        return errors[(0, tp)]

    def _is_current(self, markers: PendingMarkers) -> bool:
        """Kafka cancels markers once the coordinator epoch or the transaction moved on."""
        coordinator = self.service.coordinator
        meta = coordinator.transactions.get(markers.job.transactional_id)
        preparing = TxnState.PREPARE_COMMIT if markers.job.commit else TxnState.PREPARE_ABORT
        return (
            meta is not None
            and meta.state is preparing
            and meta.producer_id == markers.job.producer_id
            and meta.producer_epoch == markers.job.producer_epoch
            and markers.coordinator_epoch
            == self.service.coordinator_epoch_for(markers.job.transactional_id)
        )
