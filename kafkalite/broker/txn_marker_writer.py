"""Writing transaction markers as a partition's leader: the one path of every marker
(Kafka's KafkaApis.handleWriteTxnMarkersRequest, which a coordinator also reaches for the
partitions it leads itself).

Each marker is appended as leader (TRANSACTION_COORDINATOR_FENCED for an older coordinator
epoch than the producer's last one), then the answer waits with acks=all until the high
watermark covers it, so a coordinator that saw NONE never loses a marker to a leader change.
A marker that reached `__consumer_offsets` completes the producer's pending offsets in this
broker's group coordinator (Kafka's scheduleHandleTxnCompletion): offsets committed in a
transaction become visible on commit and are dropped on abort, in this one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed import TopicPartition
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.storage.control_batch import EndTxnMarker

if TYPE_CHECKING:
    from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.coordinator import GroupCoordinator


@dataclass(frozen=True)
class TxnMarker:
    """One transaction's marker for some partitions (WriteTxnMarkers' WritableTxnMarker)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


MarkerKey = tuple[int, TopicPartition]  # (marker's index, partition)


async def write_txn_markers(
    replica_manager: ReplicaManager,
    groups: GroupCoordinatorService,
    markers: Sequence[TxnMarker],
    timeout_ms: int,
) -> dict[MarkerKey, ErrorCode]:
    """Append every marker, wait until each is replicated, complete the group offsets they
    end: the error of each (marker's index, partition)."""
    errors, required = _append_all(replica_manager, markers)
    if required:
        delayed = replica_manager.delayed_markers(required)
        await complete_or_expire(replica_manager.produce_purgatory, delayed, timeout_ms)
        acks = delayed.results
        for key, error in errors.items():
            if error is ErrorCode.none:
                errors[key] = acks[key[1]].error
    _complete_group_offsets(groups, markers, errors)
    return errors


def _append_all(
    replica_manager: ReplicaManager, markers: Sequence[TxnMarker]
) -> tuple[dict[MarkerKey, ErrorCode], dict[TopicPartition, int]]:
    """(error per marker and partition, offset each partition's high watermark must reach)."""
    errors: dict[MarkerKey, ErrorCode] = {}
    required: dict[TopicPartition, int] = {}
    for index, marker in enumerate(markers):
        end = EndTxnMarker(marker.commit, marker.coordinator_epoch)
        for tp in marker.partitions:
            error, offset = replica_manager.append_txn_marker_as_leader(
                tp, marker.producer_id, marker.producer_epoch, end
            )
            errors[(index, tp)] = error
            if error is ErrorCode.none:
                required[tp] = max(offset, required.get(tp, 0))
    return errors, required


def _complete_group_offsets(
    groups: GroupCoordinatorService,
    markers: Sequence[TxnMarker],
    errors: dict[MarkerKey, ErrorCode],
) -> None:
    done = [m for i, m in enumerate(markers) if _offsets_marker_written(i, m, errors)]
    if not done:
        return

    def complete(coordinator: GroupCoordinator, now_ms: int) -> None:
        for marker in done:
            for group_id in coordinator.pending_txn_groups(marker.producer_id):
                coordinator.complete_txn(group_id, marker.producer_id, marker.commit, now_ms)

    groups.call(complete)


def _offsets_marker_written(
    index: int, marker: TxnMarker, errors: dict[MarkerKey, ErrorCode]
) -> bool:
    return any(
        tp[0] == OFFSETS_TOPIC and errors[(index, tp)] is ErrorCode.none for tp in marker.partitions
    )
