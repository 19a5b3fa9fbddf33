"""ConsumerGroupHeartbeat: joining, reconciling, leaving and fencing (KIP-848).

Follows Kafka 4's GroupMetadataManager.consumerGroupHeartbeat: validate the request, find or
create the group and the member (fencing stale epochs), record what changed, bump the group
epoch when the assignment's inputs changed, recompute the target assignment when the group
epoch moved past it, then step the member towards its target (consumer_group_reconcile).
Every change is journalled as Kafka's records for `__consumer_offsets`.

Timers: a member's session (group.consumer.session.timeout.ms, pushed back by every
heartbeat) and, while it must revoke partitions, its rebalance timeout; either expiring
fences the member out of the group.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import consumer_group_records as records
from kafkalite.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
    TopicInfo,
    subscribes_to,
)
from kafkalite.coordinator.consumer_group_assignors import ASSIGNORS
from kafkalite.coordinator.consumer_group_reconcile import next_assignment
from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group_snapshot import GroupChange
from kafkalite.coordinator.states import GroupState
from kafkalite.coordinator.timers import Timer, TimerKind


class TopicsView(Protocol):
    """The broker's topics as the coordinator needs them (the I/O layer implements it)."""

    def by_name(self, name: str) -> TopicInfo | None: ...

    def names(self) -> Iterable[str]: ...


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    api_version: int = 1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    # None in each of these: unchanged since the last heartbeat.
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""

    @property
    def is_full(self) -> bool:
        """A join, or a heartbeat that restates everything (after a lost response)."""
        return self.member_epoch == 0 or (
            self.rebalance_timeout_ms != -1
            and self.subscribed_topic_names is not None
            and self.owned is not None
        )


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged, not sent


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error, self.message = error, message


def heartbeat(
    ctx: Context, request: ConsumerGroupHeartbeatRequest, topics: TopicsView, now_ms: int
) -> ConsumerGroupHeartbeatResponse:
    try:
        _validate(ctx, request)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return _leave(ctx, request, now_ms)
        return _heartbeat(ctx, request, topics, now_ms)
    except _Refused as refused:
        return ConsumerGroupHeartbeatResponse(refused.error, refused.message)


def _validate(ctx: Context, request: ConsumerGroupHeartbeatRequest) -> None:
    def invalid(message: str) -> _Refused:
        return _Refused(ErrorCode.invalid_request, message)

    if not request.group_id:
        raise invalid("GroupId can't be empty.")
    if request.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if request.rack_id == "":
        raise invalid("RackId can't be empty.")
    if not request.member_id and (request.api_version >= 1 or request.member_epoch != 0):
        raise invalid("MemberId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid(f"MemberEpoch is invalid: {request.member_epoch}.")
    if request.subscribed_topic_regex:
        try:
            re.compile(request.subscribed_topic_regex)
        except re.error as exc:
            raise _Refused(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid "
                f"regular expression: {exc}.",
            ) from None
    assignor = request.server_assignor
    if assignor is not None and assignor not in ctx.config.consumer_assignors:
        supported = ", ".join(ctx.config.consumer_assignors)
        raise _Refused(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {assignor} is not supported. Supported assignors: {supported}.",
        )


# -- joining and heartbeating --


def _heartbeat(
    ctx: Context, request: ConsumerGroupHeartbeatRequest, topics: TopicsView, now_ms: int
) -> ConsumerGroupHeartbeatResponse:
    group = _group_for(ctx, request, now_ms)
    before = _member_for(ctx, group, request)
    member = _with_request_fields(before, request)
    bump = before.member_epoch == 0 and before.member_id not in group.members
    if member != before or before.member_id not in group.members:
        ctx.journal.append(records.member_metadata(group.group_id, member))
        bump = bump or _subscription(member) != _subscription(before)
    group.put_member(member)

    subscribed = group.subscribed_topics(topics.names() if _uses_regex(group) else ())
    metadata = {name: info for name in subscribed if (info := topics.by_name(name)) is not None}
    if metadata != group.subscription_metadata:
        group.subscription_metadata = metadata
        ctx.journal.append(
            records.partition_metadata(group.group_id, group.group_epoch + 1, metadata)
        )
        bump = True
    if bump:
        group.group_epoch += 1
        ctx.journal.append(records.group_epoch(group.group_id, group.group_epoch))
    if group.group_epoch > group.assignment_epoch:
        _compute_target(ctx, group)

    reconciled = next_assignment(group, member, request.owned)
    if reconciled != member:
        group.put_member(reconciled)
        ctx.journal.append(records.current_member_assignment(group.group_id, reconciled))
    _schedule_timers(ctx, group, member, reconciled, now_ms)

    changed = (before.member_epoch, before.assigned) != (
        reconciled.member_epoch,
        reconciled.assigned,
    )
    return ConsumerGroupHeartbeatResponse(
        ErrorCode.none,
        member_id=reconciled.member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=ctx.config.consumer_heartbeat_interval_ms,
        assignment=reconciled.assigned if changed or request.is_full else None,
    )


def _uses_regex(group: ConsumerGroup) -> bool:
    return any(m.subscribed_topic_regex for m in group.members.values())


def _group_for(ctx: Context, request: ConsumerGroupHeartbeatRequest, now_ms: int) -> ConsumerGroup:
    group_id = request.group_id
    group = ctx.consumer_groups.get(group_id)
    if group is not None:
        return group
    classic = ctx.groups.get(group_id)
    if classic is not None and classic.state is not GroupState.DEAD:
        if classic.state is not GroupState.EMPTY:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
            )
    if request.member_epoch != 0:
        raise _unknown_group(group_id)
    if classic is not None:
        # An Empty classic group becomes a consumer group; its committed offsets stay.
        ctx.groups.pop(group_id, None)
        ctx.timers.cancel_group(group_id)
        ctx.journal.append(GroupChange(group_id, None))
    group = ctx.consumer_groups[group_id] = ConsumerGroup(group_id, empty_since_ms=now_ms)
    return group


def _member_for(
    ctx: Context, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest
) -> ConsumerMember:
    """The member as it was before this heartbeat (a new one if it joins)."""
    if request.instance_id is not None:
        return _static_member_for(ctx, group, request)
    member = group.members.get(request.member_id)
    if request.member_epoch == 0:
        return member or _new_member(ctx, group, request)
    if member is None:
        raise _unknown_member(request)
    _check_epoch(member, request)
    return member


def _unknown_group(group_id: str) -> _Refused:
    return _Refused(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")


def _unknown_member(request: ConsumerGroupHeartbeatRequest) -> _Refused:
    return _Refused(
        ErrorCode.unknown_member_id,
        f"Member {request.member_id} is not a member of group {request.group_id}.",
    )


def _static_member_for(
    ctx: Context, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest
) -> ConsumerMember:
    assert request.instance_id is not None
    existing = group.member_by_instance_id(request.instance_id)
    if request.member_epoch == 0:
        if existing is None:
            return _new_member(ctx, group, request)
        if existing.member_id == request.member_id:
            return existing
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Refused(
                ErrorCode.unreleased_instance_id,
                f"Static member {request.member_id} with instance id {request.instance_id} "
                f"cannot join the group because the instance id is owned by "
                f"{existing.member_id} member.",
            )
        return _replace_static_member(ctx, group, existing, request.member_id)
    if existing is None:
        raise _unknown_member(request)
    if existing.member_id != request.member_id:
        raise _Refused(
            ErrorCode.fenced_instance_id,
            f"Static member {request.member_id} with instance id {request.instance_id} was "
            f"fenced by member {existing.member_id}.",
        )
    _check_epoch(existing, request)
    return existing


def _replace_static_member(
    ctx: Context, group: ConsumerGroup, old: ConsumerMember, member_id: str
) -> ConsumerMember:
    """A static member back within its session: it takes its old assignment, no rebalance."""
    target = group.target.get(old.member_id, frozenset())
    _remove_member_records(ctx, group, old.member_id)
    group.remove_member(old.member_id)
    ctx.timers.cancel(_session_key(group.group_id, old.member_id))
    new = replace(old, member_id=member_id, member_epoch=old.previous_member_epoch)
    group.put_member(new)
    group.target[member_id] = target
    ctx.journal.append(records.target_assignment_member(group.group_id, member_id, target))
    ctx.journal.append(records.current_member_assignment(group.group_id, new))
    return new


def _new_member(
    ctx: Context, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest
) -> ConsumerMember:
    if len(group.members) >= ctx.config.consumer_max_size:
        raise _Refused(
            ErrorCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of "
            f"{ctx.config.consumer_max_size} members.",
        )
    return ConsumerMember(member_id=request.member_id or ctx.new_uuid())


def _check_epoch(member: ConsumerMember, request: ConsumerGroupHeartbeatRequest) -> None:
    """Kafka's throwIfMemberEpochIsInvalid: a member may lag one epoch behind only when it
    missed the response that moved it (it still owns a subset of its assignment)."""
    epoch = request.member_epoch
    if epoch == member.member_epoch:
        return
    lost_response = (
        epoch < member.member_epoch
        and epoch == member.previous_member_epoch
        and request.owned is not None
        and request.owned <= member.assigned
    )
    if not lost_response:
        relation = "greater" if epoch > member.member_epoch else "smaller"
        raise _Refused(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a {relation} member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )


def _with_request_fields(
    member: ConsumerMember, request: ConsumerGroupHeartbeatRequest
) -> ConsumerMember:
    def pick(new: object, old: object) -> object:
        return old if new is None else new

    return replace(
        member,
        instance_id=pick(request.instance_id, member.instance_id),
        rack_id=pick(request.rack_id, member.rack_id),
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=(
            member.rebalance_timeout_ms
            if request.rebalance_timeout_ms == -1
            else request.rebalance_timeout_ms
        ),
        subscribed_topic_names=pick(request.subscribed_topic_names, member.subscribed_topic_names),
        # "" clears the regex; None leaves it as it was.
        subscribed_topic_regex=pick(request.subscribed_topic_regex, member.subscribed_topic_regex)
        or None,
        server_assignor=pick(request.server_assignor, member.server_assignor),
    )  # type: ignore[arg-type]


def _subscription(member: ConsumerMember) -> tuple[object, ...]:
    return (
        tuple(sorted(member.subscribed_topic_names)),
        member.subscribed_topic_regex,
        member.server_assignor,
    )


def preferred_assignor(ctx: Context, group: ConsumerGroup) -> str:
    """The assignor most members ask for; the first configured one when none asks."""
    asked = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if not asked:
        return ctx.config.consumer_assignors[0]
    return max(sorted(asked), key=lambda name: asked[name])


def _compute_target(ctx: Context, group: ConsumerGroup) -> None:
    assignor = ASSIGNORS[preferred_assignor(ctx, group)]
    subscriptions = {
        m.member_id: tuple(t for t in group.subscription_metadata if subscribes_to(m, t))
        for m in group.members.values()
    }
    target = assignor(subscriptions, group.subscription_metadata, group.target)
    for member_id, partitions in sorted(target.items()):
        if group.target.get(member_id) != partitions:
            ctx.journal.append(
                records.target_assignment_member(group.group_id, member_id, partitions)
            )
    group.target = target
    group.assignment_epoch = group.group_epoch
    ctx.journal.append(records.target_assignment_metadata(group.group_id, group.assignment_epoch))


# -- leaving and fencing --


def _leave(
    ctx: Context, request: ConsumerGroupHeartbeatRequest, now_ms: int
) -> ConsumerGroupHeartbeatResponse:
    group = ctx.consumer_groups.get(request.group_id)
    if group is None:
        raise _unknown_group(request.group_id)
    if request.instance_id is not None:
        member = group.member_by_instance_id(request.instance_id)
        if member is None:
            raise _unknown_member(request)
        if member.member_id != request.member_id:
            raise _Refused(
                ErrorCode.fenced_instance_id,
                f"Static member {request.member_id} with instance id {request.instance_id} was "
                f"fenced by member {member.member_id}.",
            )
    else:
        member = group.members.get(request.member_id)
        if member is None:
            raise _unknown_member(request)
    if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        # The static member will be back: it keeps its partitions for its session.
        away = replace(
            member,
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            previous_member_epoch=member.member_epoch,
        )
        group.put_member(away)
        ctx.journal.append(records.current_member_assignment(group.group_id, away))
        ctx.timers.cancel(_revocation_key(group.group_id, member.member_id))
    else:
        remove_member(ctx, group, member.member_id, now_ms)
    return ConsumerGroupHeartbeatResponse(
        ErrorCode.none, member_id=request.member_id, member_epoch=request.member_epoch
    )


def remove_member(ctx: Context, group: ConsumerGroup, member_id: str, now_ms: int) -> None:
    """Fence a member out: its partitions become free and the group epoch moves on."""
    _remove_member_records(ctx, group, member_id)
    group.remove_member(member_id)
    ctx.timers.cancel(_session_key(group.group_id, member_id))
    ctx.timers.cancel(_revocation_key(group.group_id, member_id))
    group.group_epoch += 1
    ctx.journal.append(records.group_epoch(group.group_id, group.group_epoch))
    if not group.members:
        group.empty_since_ms = now_ms


def _remove_member_records(ctx: Context, group: ConsumerGroup, member_id: str) -> None:
    for record_type in (
        records.CURRENT_MEMBER_ASSIGNMENT,
        records.TARGET_ASSIGNMENT_MEMBER,
        records.MEMBER_METADATA,
    ):
        ctx.journal.append(records.tombstone(record_type, group.group_id, member_id))


# -- timers --


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (TimerKind.CONSUMER_SESSION.value, group_id, member_id)


def _revocation_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (TimerKind.CONSUMER_REVOCATION.value, group_id, member_id)


def schedule_session(ctx: Context, group_id: str, member_id: str, now_ms: int) -> None:
    ctx.timers.schedule(
        Timer(
            now_ms + ctx.config.consumer_session_timeout_ms,
            TimerKind.CONSUMER_SESSION,
            group_id,
            member_id,
        )
    )


def _schedule_timers(
    ctx: Context,
    group: ConsumerGroup,
    before: ConsumerMember,
    after: ConsumerMember,
    now_ms: int,
) -> None:
    schedule_session(ctx, group.group_id, after.member_id, now_ms)
    if after.state is not MemberState.UNREVOKED_PARTITIONS:
        ctx.timers.cancel(_revocation_key(group.group_id, after.member_id))
    elif before.state is not MemberState.UNREVOKED_PARTITIONS:
        ctx.timers.schedule(
            Timer(
                now_ms + after.rebalance_timeout_ms,
                TimerKind.CONSUMER_REVOCATION,
                group.group_id,
                after.member_id,
                generation_id=after.member_epoch,
            )
        )


def on_timer(ctx: Context, timer: Timer, now_ms: int) -> None:
    group = ctx.consumer_groups.get(timer.group_id)
    member = group.members.get(timer.member_id) if group is not None else None
    if group is None or member is None:
        return
    if timer.kind is TimerKind.CONSUMER_SESSION or (
        member.state is MemberState.UNREVOKED_PARTITIONS
        and member.member_epoch == timer.generation_id
    ):
        remove_member(ctx, group, member.member_id, now_ms)
