"""SyncGroup: the leader hands in the assignment, followers wait for it (Kafka 4's
classicGroupSync). Requests parked in CompletingRebalance are answered when the leader's
assignment arrives, or with REBALANCE_IN_PROGRESS if a new rebalance starts first."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.messages import SyncGroupRequest, SyncGroupResponse, Ticket
from kafkalite.coordinator.rebalance import (
    remove_pending_sync_member,
    reschedule_heartbeat,
    set_and_propagate_assignment,
)
from kafkalite.coordinator.states import GroupState


def sync_group(ctx: Context, request: SyncGroupRequest, now_ms: int) -> Ticket:
    ticket = ctx.issue("sync", request.group_id)
    _sync(ctx, request, ticket, now_ms)
    return ticket


def _sync(ctx: Context, request: SyncGroupRequest, ticket: Ticket, now_ms: int) -> None:
    if not request.group_id:
        ctx.complete(ticket, SyncGroupResponse(ErrorCode.invalid_group_id))
        return
    group = ctx.groups.get(request.group_id)
    if group is None:
        ctx.complete(ticket, SyncGroupResponse(ErrorCode.unknown_member_id))
        return
    error = _validate(group, request)
    if error is not ErrorCode.none:
        ctx.complete(ticket, SyncGroupResponse(error))
        return

    member_id = request.member_id
    if group.state is GroupState.EMPTY:
        ctx.complete(ticket, SyncGroupResponse(ErrorCode.unknown_member_id))
    elif group.state is GroupState.PREPARING_REBALANCE:
        ctx.complete(ticket, SyncGroupResponse(ErrorCode.rebalance_in_progress))
    elif group.state is GroupState.COMPLETING_REBALANCE:
        member = group.members[member_id]
        # Kafka overwrites a previous parked SyncGroup; answer it so no waiter leaks.
        ctx.complete(
            group.take_sync_ticket(member), SyncGroupResponse(ErrorCode.rebalance_in_progress)
        )
        member.sync_ticket = ticket
        remove_pending_sync_member(ctx, group, member_id)
        if group.is_leader(member_id):
            # Members the leader left out get an empty assignment.
            assignment = {m: request.assignments.get(m, b"") for m in group.members}
            set_and_propagate_assignment(ctx, group, assignment, now_ms)
            group.transition_to(GroupState.STABLE, now_ms)
            ctx.store_group(group)
    else:  # Stable: (re)send the member its current assignment.
        remove_pending_sync_member(ctx, group, member_id)
        member = group.members[member_id]
        ctx.complete(
            ticket,
            SyncGroupResponse(
                ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
            ),
        )
        reschedule_heartbeat(ctx, group, member, now_ms)


def _validate(group: ClassicGroup, request: SyncGroupRequest) -> ErrorCode:
    error = group.validate_generation(
        request.member_id, request.group_instance_id, request.generation_id
    )
    if error is ErrorCode.none and (
        _inconsistent(request.protocol_type, group.protocol_type)
        or _inconsistent(request.protocol_name, group.protocol_name)
    ):
        return ErrorCode.inconsistent_group_protocol
    return error


def _inconsistent(requested: str | None, current: str | None) -> bool:
    # Only v5+ send these; either side unknown means nothing to compare.
    return requested is not None and current is not None and requested != current
