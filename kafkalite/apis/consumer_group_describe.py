"""ConsumerGroupDescribe (key 69), versions 0-1 (v1 adds the member type, KIP-1099).

A group id that is not a consumer group (missing, or classic) is GROUP_ID_NOT_FOUND; the
empty group id INVALID_GROUP_ID. Kafka's ACLs: DESCRIBE on the group; and a group whose
members' assignments name a topic the principal may not describe is answered
TOPIC_AUTHORIZATION_FAILED, without its description (KAFKA-18813).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.coordinator.consumer_group_admin import (
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

CONSUMER_MEMBER_TYPE = 1
UNDESCRIBABLE_TOPICS = (
    "The group has described topic(s) that the client is not authorized to describe."
)


async def handle(ctx: RequestContext, request: Any) -> Any:
    requested = request.include_authorized_operations
    # Kafka answers the invalid (empty) group ids first, then the others in request order.
    ordered = sorted(request.group_ids, key=bool)
    service = ctx.broker.groups
    # An empty id is INVALID_GROUP_ID whoever answers; the others only where they live.
    served = {
        g: ErrorCode.none
        if not g
        else service.check_group(g)
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g)
        else ErrorCode.group_authorization_failed
        for g in ordered
    }
    described, failed = await service.call_and_wait(
        lambda c, _now: [
            c.consumer_group_describe(group_id)
            if served[group_id] is ErrorCode.none
            else DescribedConsumerGroup(group_id, served[group_id])
            for group_id in ordered
        ],
        [g for g, error in served.items() if g and error is ErrorCode.none],
    )
    described = [
        DescribedConsumerGroup(d.group_id, failed[d.group_id])
        if d.group_id in failed
        else _hiding_topics(ctx, d)
        for d in described
    ]
    groups = tuple(_group(ctx, group, requested) for group in described)
    return make(ctx.schema.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=groups)


def _hiding_topics(ctx: RequestContext, group: DescribedConsumerGroup) -> DescribedConsumerGroup:
    """The group, or its refusal when it names a topic the principal may not describe."""
    topics = {t.topic_name for m in group.members for t in (*m.assignment, *m.target_assignment)}
    for topic in topics:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            return DescribedConsumerGroup(
                group.group_id, ErrorCode.topic_authorization_failed, UNDESCRIBABLE_TOPICS
            )
    return group


def _group(ctx: RequestContext, group: DescribedConsumerGroup, requested: bool) -> Any:
    return make(
        ctx.schema.DescribedGroup,
        error_code=group.error,
        error_message=group.error_message,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=tuple(_member(ctx, m) for m in group.members),
        authorized_operations=authorized_operations.group(
            ctx, requested and group.error is ErrorCode.none, group.group_id
        ),
    )


def _member(ctx: RequestContext, described: DescribedConsumerMember) -> Any:
    member = described.member
    return make(
        ctx.schema.Member,
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_assignment(ctx, described.assignment),
        target_assignment=_assignment(ctx, described.target_assignment),
        member_type=CONSUMER_MEMBER_TYPE,
    )


def _assignment(ctx: RequestContext, topics: tuple[DescribedTopicPartitions, ...]) -> Any:
    return make(
        ctx.schema.Assignment,
        topic_partitions=tuple(
            make(
                ctx.schema.TopicPartitions,
                topic_id=t.topic_id,
                topic_name=t.topic_name,
                partitions=t.partitions,
            )
            for t in topics
        ),
    )


API = ApiHandler(api_key=69, min_version=0, max_version=1, handle=handle, is_async=True)
