"""ListOffsets (key 2), versions 1-11 (v10 adds a timeout, which a local lookup needs not).

Special timestamps: -2 earliest (log start offset), -1 latest (high watermark, or the last
stable offset for read_committed), -3 (v7+) the record with the largest timestamp, -4 (v8+)
earliest local = earliest here, -5 (v9+) latest tiered and -6 (v11+, KIP-1023) earliest
pending upload: none, as no tier exists. A real timestamp finds the first record at or after
it through the time index.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.broker.replica_manager import Partition

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
NOT_FOUND = (-1, -1, -1)  # (offset, timestamp, leader epoch)


def _latest_epoch(partition: Partition) -> int:
    epoch = partition.log.leader_epoch_cache.latest_epoch
    return -1 if epoch is None else epoch


def lookup(partition: Partition, timestamp: int) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for a ListOffsets timestamp, Kafka's semantics."""
    log = partition.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        start = partition.log_start_offset
        return start, -1, log.epoch_for_offset(start)
    if timestamp == LATEST:
        return partition.high_watermark, -1, _latest_epoch(partition)
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return NOT_FOUND
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_entry()
    else:
        found = log.fetch_offset_by_timestamp(timestamp)
    if found is None or found[0] >= partition.high_watermark:
        return NOT_FOUND
    return found


def _partition_response(ctx: RequestContext, topic: str, request: Any) -> Any:
    def respond(error: ErrorCode, found: tuple[int, int, int] = NOT_FOUND) -> Any:
        offset, timestamp, epoch = found
        return make(
            ctx.schema.ListOffsetsPartitionResponse,
            partition_index=request.partition_index,
            error_code=error,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=epoch,
        )

    partition, error = ctx.broker.replica_manager.leader_partition(
        topic, request.partition_index, getattr(request, "current_leader_epoch", -1)
    )
    if partition is None or error != ErrorCode.none:
        return respond(error)
    return respond(ErrorCode.none, lookup(partition, request.timestamp))


def handle(ctx: RequestContext, request: Any) -> Any:
    topics = tuple(
        make(
            ctx.schema.ListOffsetsTopicResponse,
            name=topic.name,
            partitions=tuple(_partition_response(ctx, topic.name, p) for p in topic.partitions),
        )
        for topic in request.topics
    )
    return make(ctx.schema.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=2, min_version=1, max_version=11, handle=handle)
