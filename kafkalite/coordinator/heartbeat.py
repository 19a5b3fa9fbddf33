"""Heartbeat: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.context import Context
from kafkalite.coordinator.messages import HeartbeatRequest
from kafkalite.coordinator.rebalance import reschedule_heartbeat
from kafkalite.coordinator.states import GroupState


def heartbeat(ctx: Context, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
    if not request.group_id:
        return ErrorCode.invalid_group_id
    group = ctx.groups.get(request.group_id)
    if group is None:
        return ErrorCode.unknown_member_id
    error = group.validate_generation(
        request.member_id, request.group_instance_id, request.generation_id
    )
    if error is not ErrorCode.none:
        return error
    if group.state is GroupState.EMPTY:
        return ErrorCode.unknown_member_id

    reschedule_heartbeat(ctx, group, group.members[request.member_id], now_ms)
    if group.state is GroupState.PREPARING_REBALANCE:
        # The member must rejoin; the heartbeat still counts for its session.
        return ErrorCode.rebalance_in_progress
    # Stable, or CompletingRebalance: a member may heartbeat between its join response
    # and its SyncGroup, which is normal.
    return ErrorCode.none
