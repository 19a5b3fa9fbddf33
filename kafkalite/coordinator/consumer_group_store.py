"""Replaying the consumer group records of `__consumer_offsets` at startup.

Each record overwrites one piece of a group (its epoch, subscribed topics, a member, a
target, a member's current assignment); a tombstone removes it. Members come back with a
full session from the moment they are loaded, as in Kafka.
"""

from __future__ import annotations

from dataclasses import replace

from kafkalite.coordinator import consumer_group_records as records
from kafkalite.coordinator.consumer_group import ConsumerGroup, ConsumerMember
from kafkalite.coordinator.consumer_group_heartbeat import schedule_session
from kafkalite.coordinator.consumer_group_records import ConsumerGroupKey
from kafkalite.coordinator.context import Context
from kafkalite.coordinator.states import GroupState


def load_record(ctx: Context, key: ConsumerGroupKey, value: bytes | None, now_ms: int) -> None:
    group_id, kind, member_id = key.group_id, key.record_type, key.member_id
    group = ctx.consumer_groups.get(group_id)
    if value is None:
        if group is not None:
            _unload(ctx, group, kind, member_id)
        return
    group = group or _create(ctx, group_id, now_ms)
    if kind == records.GROUP_METADATA:
        group.group_epoch = records.decode_group_epoch(value)
    elif kind == records.PARTITION_METADATA:
        _, group.subscription_metadata = records.decode_partition_metadata(value)
    elif kind == records.TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = records.decode_target_assignment_metadata(value)
    elif kind == records.TARGET_ASSIGNMENT_MEMBER:
        assert member_id is not None
        group.target[member_id] = records.decode_target_assignment_member(value)
    else:
        assert member_id is not None
        _load_member(ctx, group, kind, member_id, value, now_ms)


def _load_member(
    ctx: Context, group: ConsumerGroup, kind: int, member_id: str, value: bytes, now_ms: int
) -> None:
    member = group.members.get(member_id) or ConsumerMember(member_id)
    if kind == records.MEMBER_METADATA:
        loaded = records.decode_member_metadata(member_id, value)
        member = replace(
            loaded,
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=member.state,
            assigned=member.assigned,
            pending_revocation=member.pending_revocation,
        )
    elif kind == records.CURRENT_MEMBER_ASSIGNMENT:
        current = records.decode_current_member_assignment(value)
        member = replace(
            member,
            member_epoch=current.member_epoch,
            previous_member_epoch=current.previous_member_epoch,
            state=current.state,
            assigned=current.assigned,
            pending_revocation=current.pending_revocation,
        )
    group.put_member(member)
    schedule_session(ctx, group.group_id, member_id, now_ms)


def _unload(ctx: Context, group: ConsumerGroup, kind: int, member_id: str | None) -> None:
    if kind == records.GROUP_METADATA:
        ctx.consumer_groups.pop(group.group_id, None)
        ctx.timers.cancel_group(group.group_id)
    elif kind == records.PARTITION_METADATA:
        group.subscription_metadata = {}
    elif kind == records.TARGET_ASSIGNMENT_MEMBER:
        group.target.pop(member_id or "", None)
    elif kind == records.MEMBER_METADATA and member_id is not None:
        group.remove_member(member_id)
        for timer_key in ctx.timers.all():
            if (timer_key.group_id, timer_key.member_id) == (group.group_id, member_id):
                ctx.timers.cancel(timer_key.key)


def _create(ctx: Context, group_id: str, now_ms: int) -> ConsumerGroup:
    classic = ctx.groups.get(group_id)
    if classic is not None and classic.state is GroupState.EMPTY:
        # Offsets replayed before the group's first record made a placeholder classic group.
        del ctx.groups[group_id]
    group = ctx.consumer_groups[group_id] = ConsumerGroup(group_id, empty_since_ms=now_ms)
    return group
