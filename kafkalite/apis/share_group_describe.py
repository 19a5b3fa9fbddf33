"""ShareGroupDescribe (key 77), version 1: members, epochs and assignments of share groups.
A group id that is not a share group (missing, classic or consumer) is GROUP_ID_NOT_FOUND;
the empty group id INVALID_GROUP_ID."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import authorized_operations
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.share.share_group import SIMPLE_ASSIGNOR, DescribedShareGroup, ShareMember


def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    requested = request.include_authorized_operations
    described = []
    for group_id in sorted(request.group_ids, key=bool):  # Kafka answers empty ids first
        if not group_id or service is None:
            error = ErrorCode.invalid_group_id if not group_id else ErrorCode.group_id_not_found
            described.append(DescribedShareGroup(group_id, error))
        elif not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            denied = ErrorCode.group_authorization_failed
            described.append(DescribedShareGroup(group_id, denied))
        else:
            described.append(service.describe(group_id))
    groups = tuple(_group(ctx, group, requested) for group in described)
    return make(ctx.schema.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=groups)


def _group(ctx: RequestContext, group: DescribedShareGroup, requested: bool) -> Any:
    return make(
        ctx.schema.DescribedGroup,
        error_code=group.error,
        error_message=group.error_message,
        group_id=group.group_id,
        group_state=group.state if group.error is ErrorCode.none else "",
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR if group.error is ErrorCode.none else "",
        members=tuple(_member(ctx, m) for m in group.members),
        authorized_operations=authorized_operations.group(
            ctx, requested and group.error is ErrorCode.none, group.group_id
        ),
    )


def _member(ctx: RequestContext, member: ShareMember) -> Any:
    by_topic: dict = defaultdict(list)
    for topic_id, index in sorted(member.assigned):
        by_topic[topic_id].append(index)
    topics = []
    for topic_id, indexes in by_topic.items():
        topic = ctx.broker.metadata.topic_by_id(topic_id)
        topics.append(
            make(
                ctx.schema.TopicPartitions,
                topic_id=topic_id,
                topic_name=topic.name if topic is not None else "",
                partitions=tuple(indexes),
            )
        )
    return make(
        ctx.schema.Member,
        member_id=member.member_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        assignment=make(ctx.schema.Assignment, topic_partitions=tuple(topics)),
    )


API = ApiHandler(api_key=77, min_version=1, max_version=1, handle=handle)
