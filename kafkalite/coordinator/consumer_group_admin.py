"""ConsumerGroupDescribe and DeleteGroups of consumer groups."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import consumer_group_records as records
from kafkalite.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    Partitions,
    TopicInfo,
)
from kafkalite.coordinator.consumer_group_heartbeat import preferred_assignor
from kafkalite.coordinator.context import Context


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: object
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member: ConsumerMember
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


def describe(ctx: Context, group_id: str) -> DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe request."""
    if not group_id:
        return DescribedConsumerGroup(group_id, ErrorCode.invalid_group_id)
    group = ctx.consumer_groups.get(group_id)
    if group is None:
        message = (
            f"Group {group_id} is not a consumer group."
            if group_id in ctx.groups
            else f"Group {group_id} not found."
        )
        return DescribedConsumerGroup(group_id, ErrorCode.group_id_not_found, message)
    topics = _topics_by_id(group)
    members = tuple(
        DescribedConsumerMember(
            member,
            _by_topic(member.assigned, topics),
            _by_topic(group.target.get(member.member_id, frozenset()), topics),
        )
        for member in group.members.values()
    )
    return DescribedConsumerGroup(
        group_id,
        ErrorCode.none,
        state=str(group.state),
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=preferred_assignor(ctx, group),
        members=members,
    )


def _topics_by_id(group: ConsumerGroup) -> dict[object, TopicInfo]:
    """Names for the topic ids of the group's assignments: its subscribed topics."""
    return {info.topic_id: info for info in group.subscription_metadata.values()}


def _by_topic(
    partitions: Partitions, topics: dict[object, TopicInfo]
) -> tuple[DescribedTopicPartitions, ...]:
    grouped: dict = defaultdict(list)
    for topic_id, partition in sorted(partitions):
        grouped[topic_id].append(partition)
    described = []
    for topic_id, indexes in grouped.items():
        info = topics.get(topic_id)
        if info is not None:  # a deleted topic's partitions are not described
            described.append(DescribedTopicPartitions(topic_id, info.name, tuple(indexes)))
    return tuple(described)


def delete(ctx: Context, group: ConsumerGroup) -> ErrorCode:
    """DeleteGroups: only an Empty consumer group goes, with its offsets."""
    if group.members:
        return ErrorCode.non_empty_group
    ctx.offsets.delete_group(group.group_id)  # offset tombstones first, as Kafka writes them
    drop_empty_group(ctx, group)
    return ErrorCode.none


def drop_empty_group(ctx: Context, group: ConsumerGroup) -> None:
    """Remove an Empty group's records (its offsets stay: see `delete`)."""
    for record_type in (
        records.TARGET_ASSIGNMENT_METADATA,
        records.PARTITION_METADATA,
        records.GROUP_METADATA,
    ):
        ctx.journal.append(records.tombstone(record_type, group.group_id))
    del ctx.consumer_groups[group.group_id]
    ctx.timers.cancel_group(group.group_id)
