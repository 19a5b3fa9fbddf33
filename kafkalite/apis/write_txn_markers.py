"""WriteTxnMarkers (key 27), versions 1-2.

A transaction coordinator asks a partition leader to append commit/abort markers (Kafka's
KafkaApis.handleWriteTxnMarkersRequest): each named partition gets one control batch for
the producer, which ends its open transaction there and (on abort) enters the
aborted-transaction index. The partition must be led here (NOT_LEADER_OR_FOLLOWER), and a
marker from an older coordinator epoch than the producer's last one is
TRANSACTION_COORDINATOR_FENCED. As in Kafka the markers are appended with acks=all: the
answer waits until the high watermark covers them, so a coordinator that saw NONE never
loses a marker to a leader change. Internal topics are writable here: the markers for
transactional offset commits go to `__consumer_offsets`, and complete the producer's
pending offsets in this broker's group coordinator.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.delayed import TopicPartition
from kafkalite.broker.delayed_wait import complete_or_expire
from kafkalite.broker.replica_manager import OFFSETS_TOPIC
from kafkalite.protocol.entities import make
from kafkalite.storage.control_batch import EndTxnMarker

MarkerKey = tuple[int, TopicPartition]  # (marker's index in the request, partition)


def _append_all(
    ctx: RequestContext, request: Any
) -> tuple[dict[MarkerKey, ErrorCode], dict[TopicPartition, int]]:
    """Append every marker: (error per marker and partition, offset each partition's high
    watermark must reach)."""
    manager = ctx.broker.replica_manager
    errors: dict[MarkerKey, ErrorCode] = {}
    required: dict[TopicPartition, int] = {}
    for index, marker in enumerate(request.markers):
        end = EndTxnMarker(marker.transaction_result, marker.coordinator_epoch)
        for topic in marker.topics:
            for partition in topic.partition_indexes:
                tp = (topic.name, partition)
                error, offset = manager.append_txn_marker_as_leader(
                    tp, marker.producer_id, marker.producer_epoch, end
                )
                errors[(index, tp)] = error
                if error is ErrorCode.none:
                    required[tp] = max(offset, required.get(tp, 0))
    return errors, required


def _complete_group_offsets(
    ctx: RequestContext, request: Any, errors: dict[MarkerKey, ErrorCode]
) -> None:
    """Kafka's scheduleHandleTxnCompletion: offsets committed in the transaction become
    visible (commit) or are dropped (abort) once its marker is in `__consumer_offsets`."""
    done = [
        marker
        for index, marker in enumerate(request.markers)
        if any(
            tp[0] == OFFSETS_TOPIC and error is ErrorCode.none
            for (at, tp), error in errors.items()
            if at == index
        )
    ]
    if not done:
        return

    def complete(coordinator: Any, now_ms: int) -> None:
        for marker in done:
            for group_id in coordinator.pending_txn_groups(marker.producer_id):
                coordinator.complete_txn(
                    group_id, marker.producer_id, marker.transaction_result, now_ms
                )

    ctx.broker.groups.call(complete)


async def handle(ctx: RequestContext, request: Any) -> Any:
    errors, required = _append_all(ctx, request)
    if required:
        manager = ctx.broker.replica_manager
        delayed = manager.delayed_markers(required)
        timeout_ms = ctx.broker.config.int("request.timeout.ms")
        await complete_or_expire(manager.produce_purgatory, delayed, timeout_ms)
        acks = delayed.results
        for key in errors:
            if errors[key] is ErrorCode.none:
                errors[key] = acks[key[1]].error
    _complete_group_offsets(ctx, request, errors)
    markers = tuple(
        make(
            ctx.schema.WritableTxnMarkerResult,
            producer_id=marker.producer_id,
            topics=tuple(
                make(
                    ctx.schema.WritableTxnMarkerTopicResult,
                    name=topic.name,
                    partitions=tuple(
                        make(
                            ctx.schema.WritableTxnMarkerPartitionResult,
                            partition_index=partition,
                            error_code=errors[(index, (topic.name, partition))],
                        )
                        for partition in topic.partition_indexes
                    ),
                )
                for topic in marker.topics
            ),
        )
        for index, marker in enumerate(request.markers)
    )
    return make(ctx.schema.WriteTxnMarkersResponse, markers=markers)


API = ApiHandler(api_key=27, min_version=1, max_version=2, handle=handle, is_async=True)
