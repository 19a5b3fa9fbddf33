"""DescribeGroups, ListGroups and DeleteGroups over classic and consumer groups."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import consumer_group_admin
from kafkalite.coordinator.consumer_group import CONSUMER_GROUP_TYPE
from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import CONSUMER_PROTOCOL_TYPE
from kafkalite.coordinator.states import GroupState

CLASSIC_GROUP_TYPE = "classic"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str = ""
    # The chosen protocol, reported only once the group is Stable (as Kafka).
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


def describe_group(ctx: Context, group_id: str, api_version: int) -> DescribedGroup:
    group = ctx.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        if api_version >= 6:
            # KIP-1043: v6 reports a missing group instead of a fake Dead one; a consumer
            # group is not a classic group (Kafka 4 describes it no further here either).
            what = "is not a classic group" if group_id in ctx.consumer_groups else "not found"
            return DescribedGroup(
                group_id,
                ErrorCode.group_id_not_found,
                str(GroupState.DEAD),
                error_message=f"Group {group_id} {what}.",
            )
        return DescribedGroup(group_id, ErrorCode.none, str(GroupState.DEAD))

    stable = group.state is GroupState.STABLE
    protocol = group.protocol_name if stable else None
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            # Metadata only means something for the chosen protocol, known when Stable.
            metadata=m.metadata(protocol) if protocol is not None else b"",
            assignment=m.assignment,
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id=group_id,
        error=ErrorCode.none,
        state=str(group.state),
        protocol_type=group.protocol_type or "",
        protocol_data=protocol or "",
        members=members,
    )


def list_groups(
    ctx: Context, states: Iterable[str] = (), types: Iterable[str] = ()
) -> list[ListedGroup]:
    """Groups matching the filters; an empty filter matches everything (case-insensitive)."""
    wanted_states = {state.lower() for state in states}
    wanted_types = {kind.lower() for kind in types}
    listed = []
    if not wanted_types or CLASSIC_GROUP_TYPE in wanted_types:
        listed += [
            ListedGroup(group.group_id, group.protocol_type or "", str(group.state))
            for group in ctx.groups.values()
            if group.state is not GroupState.DEAD
        ]
    if not wanted_types or CONSUMER_GROUP_TYPE in wanted_types:
        listed += [
            ListedGroup(
                group.group_id, CONSUMER_PROTOCOL_TYPE, str(group.state), CONSUMER_GROUP_TYPE
            )
            for group in ctx.consumer_groups.values()
        ]
    return [g for g in listed if not wanted_states or g.state.lower() in wanted_states]


def delete_groups(ctx: Context, group_ids: Iterable[str], now_ms: int) -> dict[str, ErrorCode]:
    """Delete Empty groups and their offsets; groups with members are refused."""
    results: dict[str, ErrorCode] = {}
    for group_id in group_ids:
        consumer_group = ctx.consumer_groups.get(group_id)
        if consumer_group is not None:
            results[group_id] = consumer_group_admin.delete(ctx, consumer_group)
            continue
        group = ctx.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            results[group_id] = ErrorCode.group_id_not_found
        elif group.state is not GroupState.EMPTY:
            results[group_id] = ErrorCode.non_empty_group
        else:
            ctx.remove_group(group, now_ms)
            results[group_id] = ErrorCode.none
    return results
