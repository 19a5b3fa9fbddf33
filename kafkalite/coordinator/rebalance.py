"""Starting and finishing rebalances, removing members, and applying expired timers.

Mirrors the classic-group half of Kafka 4's GroupMetadataManager (prepareRebalance,
completeClassicGroupJoin, propagateAssignment, the heartbeat / join / sync expirations).
Every function takes `now_ms`: deadlines are computed from it and state timestamps use it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.member import Member
from kafkalite.coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    JoinGroupMember,
    JoinGroupResponse,
    SyncGroupResponse,
)
from kafkalite.coordinator.states import GroupState
from kafkalite.coordinator.timers import Timer, TimerKind, heartbeat_key, join_key, sync_key

log = logging.getLogger("kafkalite.coordinator")

# -- sessions --


def reschedule_heartbeat(
    ctx: Context, group: ClassicGroup, member: Member, now_ms: int, timeout_ms: int | None = None
) -> None:
    """Push the member's session deadline out by its session timeout (or `timeout_ms`)."""
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    ctx.timers.schedule(
        Timer(now_ms + timeout, TimerKind.HEARTBEAT, group.group_id, member.member_id)
    )


def drop_member(ctx: Context, group: ClassicGroup, member_id: str) -> None:
    """Remove a member, answer whatever it had parked, and forget its session.

    The parked JoinGroup gets UNKNOWN_MEMBER_ID so a still-live client rejoins (Kafka does
    this on leave and on session expiry). Kafka never answers a parked SyncGroup of a
    removed member; we answer UNKNOWN_MEMBER_ID so the I/O layer never leaks a waiter.
    """
    member = group.members.get(member_id)
    if member is not None:
        ctx.complete(
            group.take_join_ticket(member),
            JoinGroupResponse(ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID),
        )
        ctx.complete(group.take_sync_ticket(member), SyncGroupResponse(ErrorCode.unknown_member_id))
    group.remove(member_id)
    ctx.timers.cancel(heartbeat_key(group.group_id, member_id))


# -- the join phase --


def prepare_rebalance(ctx: Context, group: ClassicGroup, now_ms: int) -> None:
    # Members parked in SyncGroup must rejoin: their assignment is about to be void.
    if group.state is GroupState.COMPLETING_REBALANCE:
        reset_and_propagate_assignment_error(ctx, group, ErrorCode.rebalance_in_progress, now_ms)
    remove_sync_expiration(ctx, group)

    is_initial = group.state is GroupState.EMPTY
    if is_initial:
        # A new group waits a little for more members, so that consumers starting together
        # do not cause one rebalance each (Kafka's InitialDelayedJoin).
        delay = ctx.config.initial_rebalance_delay_ms
        _schedule_initial_join(ctx, group, now_ms, delay, group.rebalance_timeout_ms - delay)
    log.info(
        "Preparing to rebalance group %s in state %s with old generation %d",
        group.group_id,
        group.state,
        group.generation_id,
    )
    group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
    if not is_initial:
        maybe_complete_join_else_schedule(ctx, group, now_ms)


def maybe_complete_join_else_schedule(ctx: Context, group: ClassicGroup, now_ms: int) -> None:
    if group.has_all_members_joined():
        complete_join(ctx, group, now_ms)
    else:
        ctx.timers.schedule(
            Timer(now_ms + group.rebalance_timeout_ms, TimerKind.JOIN, group.group_id)
        )


def maybe_prepare_rebalance_or_complete_join(
    ctx: Context, group: ClassicGroup, now_ms: int
) -> None:
    if group.can_rebalance:
        prepare_rebalance(ctx, group, now_ms)
    else:
        maybe_complete_join_phase(ctx, group, now_ms)


def maybe_complete_join_phase(ctx: Context, group: ClassicGroup, now_ms: int) -> None:
    """Finish the join phase early once everyone rejoined, except in the initial rebalance,
    which always waits for its delay to run out."""
    if (
        group.state is GroupState.PREPARING_REBALANCE
        and group.previous_state is not GroupState.EMPTY
        and group.has_all_members_joined()
    ):
        complete_join(ctx, group, now_ms)


def complete_join(ctx: Context, group: ClassicGroup, now_ms: int) -> None:
    """End the join phase: drop dynamic members that did not rejoin, start a generation."""
    ctx.timers.cancel(join_key(group.group_id))
    # Static members keep their slot (they are expected back); dynamic ones are gone.
    for member in group.not_yet_rejoined_members():
        if not member.is_static:
            drop_member(ctx, group, member.member_id)

    if group.state is GroupState.DEAD:
        return
    if not maybe_elect_new_joined_leader(group) and group.members:
        # Only static members remain and none rejoined: wait another rebalance timeout
        # for them to rejoin or for their sessions to expire.
        ctx.timers.schedule(
            Timer(now_ms + group.rebalance_timeout_ms, TimerKind.JOIN, group.group_id)
        )
        return

    group.init_next_generation(now_ms)
    if group.state is GroupState.EMPTY:
        log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
        ctx.store_group(group)
        return
    log.info(
        "Stabilized group %s generation %d with %d members",
        group.group_id,
        group.generation_id,
        group.size,
    )
    for member in list(group.members.values()):
        members = group.current_members() if group.is_leader(member.member_id) else ()
        response = current_generation(group, member.member_id, members)
        ctx.complete(group.take_join_ticket(member), response)
        reschedule_heartbeat(ctx, group, member, now_ms)
        member.is_new = False
        group.pending_sync_members[member.member_id] = None
    # Everyone must now send SyncGroup within the rebalance timeout.
    ctx.timers.schedule(
        Timer(
            now_ms + group.rebalance_timeout_ms,
            TimerKind.SYNC,
            group.group_id,
            generation_id=group.generation_id,
        )
    )


def current_generation(
    group: ClassicGroup,
    member_id: str,
    members: tuple[JoinGroupMember, ...],
    skip_assignment: bool = False,
    leader: str | None = None,
) -> JoinGroupResponse:
    """A successful join response describing the group's current generation."""
    return JoinGroupResponse(
        error=ErrorCode.none,
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=(group.leader_id or "") if leader is None else leader,
        skip_assignment=skip_assignment,
        members=members,
    )


def maybe_elect_new_joined_leader(group: ClassicGroup) -> bool:
    """Keep the leader if it rejoined, else promote a member that did; False if none did."""
    if group.leader_id is None:
        return False
    if group.members[group.leader_id].is_awaiting_join:
        return True
    for member in group.members.values():
        if member.is_awaiting_join:
            group.leader_id = member.member_id
            return True
    return False


# -- the sync phase --


def remove_sync_expiration(ctx: Context, group: ClassicGroup) -> None:
    group.pending_sync_members.clear()
    ctx.timers.cancel(sync_key(group.group_id))


def remove_pending_sync_member(ctx: Context, group: ClassicGroup, member_id: str) -> None:
    """A SyncGroup arrived (CompletingRebalance or Stable): once all did, no sync deadline."""
    group.pending_sync_members.pop(member_id, None)
    if group.has_received_sync_from_all_members():
        ctx.timers.cancel(sync_key(group.group_id))


def set_and_propagate_assignment(
    ctx: Context, group: ClassicGroup, assignment: Mapping[str, bytes], now_ms: int
) -> None:
    assert group.state is GroupState.COMPLETING_REBALANCE
    for member in group.members.values():
        member.assignment = assignment.get(member.member_id, b"")
    propagate_assignment(ctx, group, ErrorCode.none, now_ms)


def reset_and_propagate_assignment_error(
    ctx: Context, group: ClassicGroup, error: ErrorCode, now_ms: int
) -> None:
    assert group.state is GroupState.COMPLETING_REBALANCE
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(ctx, group, error, now_ms)


def propagate_assignment(ctx: Context, group: ClassicGroup, error: ErrorCode, now_ms: int) -> None:
    ok = error is ErrorCode.none
    for member in group.members.values():
        ticket = group.take_sync_ticket(member)
        if ticket is None:
            continue
        response = SyncGroupResponse(
            error=error,
            assignment=member.assignment,
            protocol_type=group.protocol_type if ok else None,
            protocol_name=group.protocol_name if ok else None,
        )
        ctx.complete(ticket, response)
        # A session that ran out while the member sat parked in SyncGroup was spared; give
        # it a fresh one now that the member can heartbeat again.
        reschedule_heartbeat(ctx, group, member, now_ms)


# -- removals --


def remove_member_and_update_group(
    ctx: Context, group: ClassicGroup, member: Member, now_ms: int
) -> None:
    drop_member(ctx, group, member.member_id)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(ctx, group, now_ms)
    elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join(ctx, group, now_ms)


def remove_pending_member_and_update_group(
    ctx: Context, group: ClassicGroup, member_id: str, now_ms: int
) -> None:
    drop_member(ctx, group, member_id)
    if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join(ctx, group, now_ms)


# -- timers --


def on_timer(ctx: Context, timer: Timer, now_ms: int) -> None:
    group = ctx.groups.get(timer.group_id)
    if group is None or group.state is GroupState.DEAD:
        return  # the group was deleted after the timer was set
    if timer.kind is TimerKind.HEARTBEAT:
        _expire_heartbeat(ctx, group, timer.member_id, now_ms)
    elif timer.kind is TimerKind.JOIN:
        if group.state is GroupState.PREPARING_REBALANCE:
            complete_join(ctx, group, now_ms)
    elif timer.kind is TimerKind.INITIAL_JOIN:
        if group.state is GroupState.PREPARING_REBALANCE:
            _initial_join_elapsed(ctx, group, timer, now_ms)
    elif timer.kind is TimerKind.SYNC:
        _expire_pending_sync(ctx, group, timer.generation_id, now_ms)


def _expire_heartbeat(ctx: Context, group: ClassicGroup, member_id: str, now_ms: int) -> None:
    if group.is_pending_member(member_id):
        # Got MEMBER_ID_REQUIRED but never came back.
        remove_pending_member_and_update_group(ctx, group, member_id, now_ms)
        return
    member = group.members.get(member_id)
    if member is not None and not member.has_satisfied_heartbeat:
        log.info("Member %s in group %s has failed, removing it", member_id, group.group_id)
        remove_member_and_update_group(ctx, group, member, now_ms)


def _initial_join_elapsed(ctx: Context, group: ClassicGroup, timer: Timer, now_ms: int) -> None:
    if group.new_member_added and timer.remaining_ms != 0:
        # Someone joined during the delay: wait again, within the rebalance timeout budget.
        group.new_member_added = False
        delay = min(ctx.config.initial_rebalance_delay_ms, timer.remaining_ms)
        _schedule_initial_join(ctx, group, now_ms, delay, timer.remaining_ms - timer.delay_ms)
    else:
        complete_join(ctx, group, now_ms)


def _schedule_initial_join(
    ctx: Context, group: ClassicGroup, now_ms: int, delay_ms: int, remaining_ms: int
) -> None:
    """The initial join phase ends in `delay_ms`, with `remaining_ms` (floored at 0) left
    of the rebalance timeout to extend it by."""
    ctx.timers.schedule(
        Timer(
            now_ms + delay_ms,
            TimerKind.INITIAL_JOIN,
            group.group_id,
            delay_ms=delay_ms,
            remaining_ms=max(remaining_ms, 0),
        )
    )


def _expire_pending_sync(
    ctx: Context, group: ClassicGroup, generation_id: int, now_ms: int
) -> None:
    if generation_id != group.generation_id:
        return
    if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        return
    if group.has_received_sync_from_all_members():
        return
    # Members that got their join response but never synced are presumed dead.
    log.info(
        "Group %s removed members that did not sync: %s",
        group.group_id,
        sorted(group.pending_sync_members),
    )
    for member_id in list(group.pending_sync_members):
        drop_member(ctx, group, member_id)
    prepare_rebalance(ctx, group, now_ms)
