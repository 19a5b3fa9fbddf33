"""LeaveGroup, one member (v0-2) or a batch (v3+, KIP-345), as Kafka 4's classicGroupLeave."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberLeaveResponse,
)
from kafkalite.coordinator.rebalance import (
    drop_member,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
)
from kafkalite.coordinator.states import GroupState


def leave_group(ctx: Context, request: LeaveGroupRequest, now_ms: int) -> LeaveGroupResponse:
    if not request.group_id:
        return LeaveGroupResponse(ErrorCode.invalid_group_id)
    group = ctx.groups.get(request.group_id)
    if group is None:
        # As Kafka 4's GroupCoordinatorService.leaveGroup: every member is unknown, and there
        # is no top-level error (v0-2 clients, with no member list, see the member's error).
        return LeaveGroupResponse(
            ErrorCode.none,
            tuple(_answer(identity, ErrorCode.unknown_member_id) for identity in request.members),
        )
    if group.state is GroupState.DEAD:
        return LeaveGroupResponse(ErrorCode.coordinator_not_available)

    responses = tuple(_leave_one(ctx, group, identity) for identity in request.members)
    if any(response.error is ErrorCode.none for response in responses):
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            maybe_prepare_rebalance_or_complete_join(ctx, group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            # The leavers may have been the last ones the join phase waited for.
            maybe_complete_join_phase(ctx, group, now_ms)
    return LeaveGroupResponse(ErrorCode.none, responses)


def _answer(identity: MemberIdentity, error: ErrorCode) -> MemberLeaveResponse:
    return MemberLeaveResponse(identity.member_id, identity.group_instance_id, error)


def _leave_one(ctx: Context, group: ClassicGroup, identity: MemberIdentity) -> MemberLeaveResponse:
    if identity.member_id == UNKNOWN_MEMBER_ID:
        # Administrative removal by group.instance.id (e.g. kafka-consumer-groups).
        instance_id = identity.group_instance_id
        current = group.static_member_id(instance_id) if instance_id is not None else None
        if current is None:
            return _answer(identity, ErrorCode.unknown_member_id)
        drop_member(ctx, group, current)
        return _answer(identity, ErrorCode.none)
    if group.is_pending_member(identity.member_id):
        error = ErrorCode.none
    else:
        error = group.validate_member(identity.member_id, identity.group_instance_id)
    if error is ErrorCode.none:
        drop_member(ctx, group, identity.member_id)
    return _answer(identity, error)
