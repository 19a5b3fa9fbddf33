"""OffsetCommit (key 8), versions 2-9 (0-1 were removed in Kafka 4, KIP-896).

v2-4 carry a retention time; v6+ the leader epoch; v7+ group.instance.id. Partitions the
broker does not have get UNKNOWN_TOPIC_OR_PARTITION; the rest go to the coordinator, which
persists them in `__consumer_offsets` before this answers. Like Kafka, the group id "" is
accepted "for backwards compatibility" (only a null id, which the schema cannot carry, is
INVALID_GROUP_ID).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make, millis
from kafkalite.coordinator import OffsetCommitRequest, PartitionCommit

NO_RETENTION = -1


def handle(ctx: RequestContext, request: Any) -> Any:
    groups = ctx.broker.groups
    requested = [(t.name, p) for t in request.topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    commits = []
    for topic, p in requested:
        if ctx.broker.replica_manager.partition(topic, p.partition_index) is None:
            errors[(topic, p.partition_index)] = ErrorCode.unknown_topic_or_partition
        else:
            commits.append(
                PartitionCommit(
                    topic,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
    if commits:
        retention = getattr(request, "retention_time", None)
        committed = groups.commit_offsets(
            OffsetCommitRequest(
                group_id=request.group_id,
                partitions=tuple(commits),
                api_version=ctx.api_version,
                generation_id=request.generation_id_or_member_epoch,
                member_id=request.member_id,
                group_instance_id=getattr(request, "group_instance_id", None),
                retention_time_ms=NO_RETENTION if retention is None else millis(retention),
            )
        )
        errors.update(((r.topic, r.partition), r.error) for r in committed.partitions)
    return _response(ctx, request, errors)


def _response(ctx: RequestContext, request: Any, errors: dict[tuple[str, int], ErrorCode]) -> Any:
    schema = ctx.schema
    topics = tuple(
        make(
            schema.OffsetCommitResponseTopic,
            name=t.name,
            partitions=tuple(
                make(
                    schema.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=errors[(t.name, p.partition_index)],
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return make(schema.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=8, min_version=2, max_version=9, handle=handle)
