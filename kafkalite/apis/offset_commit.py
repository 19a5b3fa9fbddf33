"""OffsetCommit (key 8), versions 2-10 (0-1 were removed in Kafka 4, KIP-896).

v2-4 carry a retention time; v6+ the leader epoch; v7+ group.instance.id; v10 names topics
by id (an unknown id: UNKNOWN_TOPIC_ID). Partitions the cluster does not have get
UNKNOWN_TOPIC_OR_PARTITION (Kafka's metadataCache.contains: a coordinator commits offsets of
partitions other brokers host); the rest go to the coordinator, which persists them in
`__consumer_offsets` and answers once they are replicated (acks=all); a broker that does not
serve the group answers NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads the
group's partition). Like Kafka, the group id "" is accepted "for backwards compatibility"
(only a null id, which the schema cannot carry, is
INVALID_GROUP_ID).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.topic_ids import topic_name
from kafkalite.coordinator import OffsetCommitRequest, PartitionCommit
from kafkalite.protocol.entities import NO_THROTTLE, make, millis
from kafkalite.security.acl import AclOperation, ResourceType

NO_RETENTION = -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    groups = ctx.broker.groups
    names = [topic_name(ctx, t) for t in request.topics]
    errors: dict[tuple[str | None, int], ErrorCode] = {}
    commits = []
    entries = zip(names, request.topics, strict=True)
    group_denied = not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id)
    for topic, p in ((name, p) for name, t in entries for p in t.partitions):
        if group_denied:  # KafkaApis: READ on the group, then READ on each topic
            errors[(topic, p.partition_index)] = ErrorCode.group_authorization_failed
        elif topic is None:  # v10+: an id no topic has
            errors[(topic, p.partition_index)] = ErrorCode.unknown_topic_id
        elif not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic):
            errors[(topic, p.partition_index)] = ErrorCode.topic_authorization_failed
        elif ctx.broker.metadata.partition_state(topic, p.partition_index) is None:
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
        committed = await groups.commit_offsets(
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
    return _response(ctx, request, names, errors)


def _response(
    ctx: RequestContext,
    request: Any,
    names: list[str | None],
    errors: dict[tuple[str | None, int], ErrorCode],
) -> Any:
    schema = ctx.schema
    topics = tuple(
        make(
            schema.OffsetCommitResponseTopic,
            name=getattr(t, "name", None),
            topic_id=getattr(t, "topic_id", None),
            partitions=tuple(
                make(
                    schema.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=errors[(name, p.partition_index)],
                )
                for p in t.partitions
            ),
        )
        for name, t in zip(names, request.topics, strict=True)
    )
    return make(schema.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiHandler(api_key=8, min_version=2, max_version=10, handle=handle, is_async=True)
