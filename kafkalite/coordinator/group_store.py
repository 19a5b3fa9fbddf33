"""Group metadata as Kafka persists it: snapshots to write, records to replay.

Kafka stores a classic group's generation, protocol, leader and members (with their
subscriptions and assignments) in `__consumer_offsets` when a generation gets its
assignment, when a group empties, and when a static member takes a new member id; a
tombstone when the group goes. Replaying those records after a restart brings Stable
groups back with their members, so consumers keep going without a rebalance.
"""

from __future__ import annotations

from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.member import Member
from kafkalite.coordinator.messages import Protocol
from kafkalite.coordinator.rebalance import reschedule_heartbeat
from kafkalite.coordinator.records import GroupMetadataRecord, MemberMetadataRecord
from kafkalite.coordinator.states import GroupState


def load_group(
    ctx: Context, group_id: str, record: GroupMetadataRecord | None, now_ms: int
) -> None:
    """Replay one group metadata record (None: its tombstone) without queueing it again."""
    ctx.timers.cancel_group(group_id)
    if record is None:
        ctx.groups.pop(group_id, None)
        return
    since = record.current_state_timestamp_ms if record.current_state_timestamp_ms >= 0 else now_ms
    group = ClassicGroup(
        group_id,
        GroupState.STABLE if record.members else GroupState.EMPTY,
        since,
        generation_id=record.generation,
        protocol_type=record.protocol_type or None,
        protocol_name=record.protocol_name,
    )
    for value in record.members:
        group.add(_member(value, record))
    group.leader_id = record.leader if record.leader in group.members else group.leader_id
    group.subscribed_topics = group.compute_subscribed_topics()
    ctx.groups[group_id] = group
    # Members get a full session from now to come back (Kafka does the same on load).
    for member in group.members.values():
        reschedule_heartbeat(ctx, group, member, now_ms)


def _member(value: MemberMetadataRecord, record: GroupMetadataRecord) -> Member:
    protocols = (
        (Protocol(record.protocol_name, value.subscription),)
        if record.protocol_name is not None
        else ()
    )
    return Member(
        member_id=value.member_id,
        group_instance_id=value.group_instance_id,
        client_id=value.client_id,
        client_host=value.client_host,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        session_timeout_ms=value.session_timeout_ms,
        protocol_type=record.protocol_type,
        protocols=protocols,
        assignment=value.assignment,
    )
