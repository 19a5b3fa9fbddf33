"""What Kafka persists of a classic group: a `GroupMetadataValue` snapshot, queued for the
I/O layer in the coordinator's journal (None: a tombstone, the group is gone)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from kafkalite.coordinator.records import GroupMetadataRecord, MemberMetadataRecord

if TYPE_CHECKING:
    from kafkalite.coordinator.group import ClassicGroup


class GroupChange(NamedTuple):
    group_id: str
    value: GroupMetadataRecord | None  # None: the group was deleted (a tombstone)


def snapshot(group: ClassicGroup) -> GroupMetadataRecord:
    protocol = group.protocol_name
    return GroupMetadataRecord(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol_name=protocol,
        leader=group.leader_id if group.members else None,
        current_state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            MemberMetadataRecord(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=m.assignment,
            )
            for m in group.members.values()
        ),
    )
