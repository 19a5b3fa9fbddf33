"""WriteTxnMarkers (key 27), versions 1-2.

A transaction coordinator asks a partition leader to append commit/abort markers (Kafka's
KafkaApis.handleWriteTxnMarkersRequest): each named partition gets one control batch for
the producer, which ends its open transaction there and (on abort) enters the
aborted-transaction index. Internal topics are writable here: the markers for transactional
offset commits go to `__consumer_offsets`.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import ApiHandler, RequestContext, make
from kafkalite.storage.control_batch import EndTxnMarker


def _topic_results(ctx: RequestContext, marker: Any) -> tuple[Any, ...]:
    manager = ctx.broker.replica_manager
    end = EndTxnMarker(marker.transaction_result, marker.coordinator_epoch)
    return tuple(
        make(
            ctx.schema.WritableTxnMarkerTopicResult,
            name=topic.name,
            partitions=tuple(
                make(
                    ctx.schema.WritableTxnMarkerPartitionResult,
                    partition_index=index,
                    error_code=manager.append_txn_marker(
                        (topic.name, index), marker.producer_id, marker.producer_epoch, end
                    ),
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in marker.topics
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    markers = tuple(
        make(
            ctx.schema.WritableTxnMarkerResult,
            producer_id=marker.producer_id,
            topics=_topic_results(ctx, marker),
        )
        for marker in request.markers
    )
    return make(ctx.schema.WriteTxnMarkersResponse, markers=markers)


API = ApiHandler(api_key=27, min_version=1, max_version=2, handle=handle)
