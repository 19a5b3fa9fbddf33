"""WriteTxnMarkers (key 27), versions 1-2.

A transaction coordinator asks a partition leader to append commit/abort markers (Kafka's
KafkaApis.handleWriteTxnMarkersRequest): each named partition gets one control batch for
the producer, which ends its open transaction there and (on abort) enters the
aborted-transaction index. The partition must be led here (NOT_LEADER_OR_FOLLOWER). The
appending, the acks=all wait and the group offsets a marker completes are
broker/txn_marker_writer.py's: the one path of every marker, a coordinator's own
partitions included.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.txn_marker_writer import TxnMarker, write_txn_markers
from kafkalite.protocol.entities import make
from kafkalite.security.acl import AclOperation


def _authorized(ctx: RequestContext) -> bool:
    """KafkaApis: ALTER on the cluster (an operator's kafka-transactions.sh abort), else
    CLUSTER_ACTION (brokers)."""
    altering = ctx.authorized_cluster(AclOperation.ALTER, log_denied=False)
    return altering or ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)


async def handle(ctx: RequestContext, request: Any) -> Any:
    markers = [
        TxnMarker(
            marker.producer_id,
            marker.producer_epoch,
            marker.transaction_result,
            marker.coordinator_epoch,
            tuple((t.name, p) for t in marker.topics for p in t.partition_indexes),
        )
        for marker in request.markers
    ]
    timeout_ms = ctx.broker.config.int("request.timeout.ms")
    if _authorized(ctx):
        errors = await write_txn_markers(
            ctx.broker.replica_manager, ctx.broker.groups, markers, timeout_ms
        )
    else:
        errors = {
            (index, tp): ErrorCode.cluster_authorization_failed
            for index, marker in enumerate(markers)
            for tp in marker.partitions
        }
    results = tuple(
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
    return make(ctx.schema.WriteTxnMarkersResponse, markers=results)


API = ApiHandler(api_key=27, min_version=1, max_version=2, handle=handle, is_async=True)
