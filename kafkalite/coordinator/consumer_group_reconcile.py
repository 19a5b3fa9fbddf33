"""A member's next current assignment, after Kafka 4's CurrentAssignmentBuilder.

The member moves towards its target assignment one safe step at a time:
1. partitions it must give up are revoked first (state UNREVOKED_PARTITIONS, epoch kept)
   and stay its own until a heartbeat no longer lists them as owned;
2. then it moves to the assignment epoch and gets the new partitions that are free; those
   another member still owns (or has not confirmed revoking) come later
   (UNRELEASED_PARTITIONS) - so a partition never has two owners.
"""

from __future__ import annotations

from dataclasses import replace

from kafkalite.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
)


def next_assignment(
    group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None
) -> ConsumerMember:
    """`owned`: the partitions the heartbeat says the member owns (None: not sent)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS and _still_owns(
        owned, member.pending_revocation
    ):
        return member
    if (
        member.state is MemberState.STABLE
        and member.member_epoch == group.assignment_epoch
        and member.assigned == group.target.get(member.member_id, member.assigned)
    ):
        return member
    return _compute(group, member, owned)


def _still_owns(owned: Partitions | None, revoking: Partitions) -> bool:
    # Without an owned list the coordinator cannot know: assume nothing was revoked yet.
    return owned is None or bool(owned & revoking)


def _compute(
    group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None
) -> ConsumerMember:
    target = group.target.get(member.member_id, frozenset())
    current = member.assigned
    kept = current & target
    revoking = current - target
    wanted = target - current
    free = frozenset(
        tp for tp in wanted if group.owner_epoch(tp) == -1 or _owned_by(group, member, tp)
    )
    unreleased = bool(wanted - free)
    if revoking and _still_owns(owned, revoking):
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
        )
    return replace(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=(
            member.member_epoch
            if member.member_epoch != group.assignment_epoch
            else member.previous_member_epoch
        ),
        member_epoch=group.assignment_epoch,
        assigned=kept | free,
        pending_revocation=frozenset(),
    )


def _owned_by(group: ConsumerGroup, member: ConsumerMember, tp: tuple) -> bool:
    """`tp` is recorded as this member's own (e.g. pending its revocation confirmation)."""
    return tp in member.owned
