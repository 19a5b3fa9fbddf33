"""Share groups (KIP-932) for `kafkalite group list|describe`, asked with kio requests on
kafkalite's own client (confluent-kafka's AdminClient has no share group calls), so PLAINTEXT
listeners only, as tools/raw_requests.py.

`describe` shows what `kafka-share-groups.sh --describe --members` and `--offsets` show: the
members with their assignments, and per partition the share-partition start offset (records
below it are all acknowledged or archived) and the lag (records at or past it not yet
acknowledged: available or in flight).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.types import GroupId

from kafkalite.tools.common import Connection, ToolError
from kafkalite.tools.raw_requests import ask, group_coordinator

SHARE = "share"


def list_share_groups(conn: Connection, addresses: list[str]) -> list[dict[str, str]]:
    """The share groups of every broker at `addresses` (each coordinator lists its own)."""
    found: dict[str, dict[str, str]] = {}
    for address in addresses:
        for group in _listed(conn, address):
            found[group.group_id] = {
                "group": group.group_id,
                "state": group.group_state.upper(),
                "type": SHARE,
            }
    return [found[name] for name in sorted(found)]


def _listed(conn: Connection, address: str) -> tuple[Any, ...]:
    """The share groups the broker at `address` coordinates (ListGroups v5, KIP-848's type
    filter: a broker without share groups lists none)."""
    answer = ask(conn, address, ListGroupsRequest(types_filter=(SHARE,)))
    if answer.error_code != ErrorCode.none:
        raise ToolError(f"{address}: ListGroups: {answer.error_code.name.upper()}")
    return tuple(answer.groups)


@dataclass
class ShareGroupDescription:
    group: str
    state: str
    coordinator: str
    assignor: str
    members: list[dict[str, Any]]
    offsets: list[dict[str, Any]]

    @property
    def total_lag(self) -> int:
        return sum(max(row["lag"], 0) for row in self.offsets)

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "type": SHARE,
            "state": self.state,
            "coordinator": self.coordinator,
            "assignor": self.assignor,
            "members": self.members,
            "offsets": self.offsets,
            "total_lag": self.total_lag,
        }


def describe_share_group(
    conn: Connection, address: str, group: str
) -> ShareGroupDescription | None:
    """The share group `group`, or None when no share group has that id."""
    coordinator = group_coordinator(conn, address, group)
    if all(listed.group_id != group for listed in _listed(conn, coordinator)):
        return None  # asked first: a broker without share groups may not know the API
    request = ShareGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False
    )
    (described,) = ask(conn, coordinator, request).groups
    if described.error_code == ErrorCode.group_id_not_found:
        return None
    if described.error_code != ErrorCode.none:
        raise ToolError(f"cannot describe group {group}: {described.error_code.name.upper()}")
    members = [_member(m) for m in described.members]
    owners = {(a["topic"], a["partition"]): m for m in members for a in m["assignment"]}
    return ShareGroupDescription(
        group,
        described.group_state.upper(),
        coordinator,
        described.assignor_name,
        members,
        _offsets(conn, coordinator, group, owners),
    )


def _member(member: Any) -> dict[str, Any]:
    assigned = sorted(
        (tp.topic_name, p) for tp in member.assignment.topic_partitions for p in tp.partitions
    )
    return {
        "member_id": member.member_id,
        "client_id": member.client_id,
        "host": member.client_host,
        "assignment": [{"topic": t, "partition": p} for t, p in assigned],
    }


def _offsets(
    conn: Connection, coordinator: str, group: str, owners: dict[tuple[str, int], dict]
) -> list[dict[str, Any]]:
    request = DescribeShareGroupOffsetsRequest(
        groups=(DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=None),)
    )
    (answer,) = ask(conn, coordinator, request).groups
    if answer.error_code != ErrorCode.none:
        raise ToolError(f"cannot fetch offsets of group {group}: {answer.error_code.name.upper()}")
    rows = []
    for topic in answer.topics:
        for p in topic.partitions:
            owner = owners.get((topic.topic_name, p.partition_index))
            rows.append(
                {
                    "topic": topic.topic_name,
                    "partition": p.partition_index,
                    "start_offset": p.start_offset,
                    "lag": p.lag,
                    "member_id": owner["member_id"] if owner else None,
                    "client_id": owner["client_id"] if owner else None,
                    "host": owner["host"] if owner else None,
                }
            )
    return sorted(rows, key=lambda row: (row["topic"], row["partition"]))
