"""JoinGroup: new members, KIP-394 member ids, static members (KIP-345) and rejoins.

Follows Kafka 4's classicGroupJoin* methods. The request's ticket is answered either
at once (errors, MEMBER_ID_REQUIRED, rejoins that change nothing) or when the join phase
completes (`rebalance.complete_join`).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import consumer_group_admin
from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.member import Member
from kafkalite.coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupResponse,
    Ticket,
)
from kafkalite.coordinator.rebalance import (
    current_generation,
    drop_member,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    prepare_rebalance,
    reschedule_heartbeat,
)
from kafkalite.coordinator.states import GroupState
from kafkalite.coordinator.timers import Timer, TimerKind, heartbeat_key


def join_group(ctx: Context, request: JoinGroupRequest, now_ms: int) -> Ticket:
    ticket = ctx.issue("join", request.group_id)
    _join(ctx, request, ticket, now_ms)
    return ticket


def _fail(ctx: Context, ticket: Ticket, error: ErrorCode, member_id: str) -> None:
    ctx.complete(ticket, JoinGroupResponse(error, member_id))


def _join(ctx: Context, request: JoinGroupRequest, ticket: Ticket, now_ms: int) -> None:
    config = ctx.config
    if not request.group_id:
        _fail(ctx, ticket, ErrorCode.invalid_group_id, request.member_id)
        return
    if not (
        config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms
    ):
        _fail(ctx, ticket, ErrorCode.invalid_session_timeout, request.member_id)
        return

    consumer_group = ctx.consumer_groups.get(request.group_id)
    if consumer_group is not None:
        if consumer_group.members:
            # Classic members cannot join a KIP-848 group here (Kafka 4 can migrate them).
            _fail(ctx, ticket, ErrorCode.group_id_not_found, request.member_id)
            return
        consumer_group_admin.drop_empty_group(ctx, consumer_group)  # offsets stay

    is_unknown_member = request.member_id == UNKNOWN_MEMBER_ID
    group = ctx.groups.get(request.group_id)
    if group is None:
        # Only a newcomer creates a group; a member id for a missing group is stale.
        if not is_unknown_member:
            _fail(ctx, ticket, ErrorCode.unknown_member_id, request.member_id)
            return
        group = ClassicGroup(request.group_id, GroupState.EMPTY, now_ms)
        ctx.groups[request.group_id] = group

    protocol_names = frozenset(protocol.name for protocol in request.protocols)
    if not _accept_joining_member(group, request.member_id, config.max_size):
        drop_member(ctx, group, request.member_id)
        _fail(ctx, ticket, ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID)
    elif group.state is GroupState.DEAD:
        _fail(ctx, ticket, ErrorCode.coordinator_not_available, request.member_id)
    elif not group.supports_protocols(request.protocol_type, protocol_names):
        _fail(ctx, ticket, ErrorCode.inconsistent_group_protocol, request.member_id)
    elif is_unknown_member:
        _join_new_member(ctx, group, request, ticket, now_ms)
    else:
        _join_existing_member(ctx, group, request, ticket, now_ms)


def _accept_joining_member(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    state = group.state
    if state in (GroupState.EMPTY, GroupState.DEAD):
        return True
    if state is GroupState.PREPARING_REBALANCE:
        # Count members already waiting, not the group size: the size may exceed a lowered
        # group.max.size, and this way the last members to rejoin are the ones shed.
        member = group.members.get(member_id)
        if member is not None and member.is_awaiting_join:
            return True
        return group.num_awaiting_join < max_size
    # CompletingRebalance / Stable: members that did not rejoin are already gone.
    return group.has_member(member_id) or group.size < max_size


def _join_new_member(
    ctx: Context, group: ClassicGroup, request: JoinGroupRequest, ticket: Ticket, now_ms: int
) -> None:
    instance_id = request.group_instance_id
    prefix = request.client_id if instance_id is None else instance_id
    new_member_id = f"{prefix}-{ctx.new_uuid()}"
    if instance_id is not None:
        existing = group.static_member_id(instance_id)
        if existing is not None:
            _update_static_member_and_rebalance(
                ctx, group, request, existing, new_member_id, ticket, now_ms
            )
        else:
            _add_member_and_rebalance(ctx, group, request, new_member_id, ticket, now_ms)
    elif request.requires_known_member_id:
        # KIP-394: hand out an id and make the client come back with it, so a client
        # retrying after a lost response does not leave a ghost member behind.
        group.add_pending_member(new_member_id)
        deadline = now_ms + request.session_timeout_ms
        ctx.timers.schedule(Timer(deadline, TimerKind.HEARTBEAT, group.group_id, new_member_id))
        _fail(ctx, ticket, ErrorCode.member_id_required, new_member_id)
    else:
        _add_member_and_rebalance(ctx, group, request, new_member_id, ticket, now_ms)


def _join_existing_member(
    ctx: Context, group: ClassicGroup, request: JoinGroupRequest, ticket: Ticket, now_ms: int
) -> None:
    member_id = request.member_id
    if group.is_pending_member(member_id):
        if request.group_instance_id is not None:
            # Kafka throws here: pending ids are only ever given to dynamic members.
            _fail(ctx, ticket, ErrorCode.unknown_server_error, member_id)
            return
        _add_member_and_rebalance(ctx, group, request, member_id, ticket, now_ms)
        return

    error = group.validate_member(member_id, request.group_instance_id)
    if error is not ErrorCode.none:
        _fail(ctx, ticket, error, member_id)
        return

    member = group.members[member_id]
    if group.state is GroupState.PREPARING_REBALANCE:
        _update_member_and_rebalance(ctx, group, member, request, ticket, now_ms)
    elif group.state is GroupState.COMPLETING_REBALANCE:
        if member.matches(request.protocols):
            # Probably a retry after a lost join response: resend this generation's.
            members = group.current_members() if group.is_leader(member_id) else ()
            ctx.complete(ticket, current_generation(group, member_id, members))
        else:
            _update_member_and_rebalance(ctx, group, member, request, ticket, now_ms)
    elif group.state is GroupState.STABLE:
        if group.is_leader(member_id) or not member.matches(request.protocols):
            # A leader rejoin forces a rebalance: it lets the leader react to changes that
            # do not show in member metadata (e.g. new partitions of subscribed topics).
            _update_member_and_rebalance(ctx, group, member, request, ticket, now_ms)
        else:
            ctx.complete(ticket, current_generation(group, member_id, ()))
    else:
        # Empty with a member? Should not happen; make the member start over.
        _fail(ctx, ticket, ErrorCode.unknown_member_id, member_id)


def _add_member_and_rebalance(
    ctx: Context,
    group: ClassicGroup,
    request: JoinGroupRequest,
    member_id: str,
    ticket: Ticket,
    now_ms: int,
) -> None:
    member = Member(
        member_id=member_id,
        group_instance_id=request.group_instance_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple(request.protocols),
        is_new=True,
    )
    # Joining during the initial delayed rebalance extends the delay.
    if group.state is GroupState.PREPARING_REBALANCE and group.previous_state is GroupState.EMPTY:
        group.new_member_added = True
    group.add(member, ticket)
    # A parked new member cannot heartbeat and its socket is not watched, so it gets the
    # (long) new-member join timeout instead of its session timeout.
    reschedule_heartbeat(ctx, group, member, now_ms, ctx.config.new_member_join_timeout_ms)
    maybe_prepare_rebalance_or_complete_join(ctx, group, now_ms)


def _update_member_and_rebalance(
    ctx: Context,
    group: ClassicGroup,
    member: Member,
    request: JoinGroupRequest,
    ticket: Ticket,
    now_ms: int,
) -> None:
    superseded = group.update_member(
        member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, ticket
    )
    # Kafka silently drops a superseded parked JoinGroup; we answer it so no waiter leaks.
    ctx.complete(superseded, JoinGroupResponse(ErrorCode.rebalance_in_progress, member.member_id))
    maybe_prepare_rebalance_or_complete_join(ctx, group, now_ms)


def _update_static_member_and_rebalance(
    ctx: Context,
    group: ClassicGroup,
    request: JoinGroupRequest,
    old_member_id: str,
    new_member_id: str,
    ticket: Ticket,
    now_ms: int,
) -> None:
    """A known group.instance.id joined with no member id: a restart (or a duplicate).

    The new member id takes over the slot and the old id is fenced; a Stable group whose
    protocol choice is unchanged hands back the old assignment without a rebalance.
    """
    assert request.group_instance_id is not None
    current_leader = group.leader_id or ""
    old, new = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
    # Whoever still waits under the old id is a duplicate instance: fence it.
    ctx.complete(old.join_ticket, JoinGroupResponse(ErrorCode.fenced_instance_id, old_member_id))
    ctx.complete(old.sync_ticket, SyncGroupResponse(ErrorCode.fenced_instance_id))
    ctx.timers.cancel(heartbeat_key(group.group_id, old_member_id))
    reschedule_heartbeat(ctx, group, new, now_ms)
    group.update_member(
        new, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, ticket
    )

    if group.state is GroupState.STABLE:
        if group.protocol_name == group.select_protocol():
            # Persist the new member id before answering, as Kafka does.
            ctx.store_group(group)
            if request.supports_skip_assignment:
                # v9+: the leader learns it leads but must not run the assignor, as a
                # Stable group would not broadcast a new assignment anyway.
                is_leader = group.is_leader(new_member_id)
                members = group.current_members() if is_leader else ()
                response = current_generation(group, new_member_id, members, is_leader)
            else:
                # Older clients: report the previous leader id, so a restarted leader does
                # not think it leads and does not compute a throwaway assignment.
                response = current_generation(group, new_member_id, (), leader=current_leader)
            ctx.complete(group.take_join_ticket(new), response)
        else:
            maybe_prepare_rebalance_or_complete_join(ctx, group, now_ms)
    elif group.state is GroupState.COMPLETING_REBALANCE:
        # The leader may already be assigning for the old member id; start over.
        prepare_rebalance(ctx, group, now_ms)
    elif group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join_phase(ctx, group, now_ms)
