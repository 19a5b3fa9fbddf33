"""Plain, version-agnostic request and response records for the membership APIs.

The I/O layer builds these from kio requests and turns the responses back into kio
responses. JoinGroup and SyncGroup may be parked: the coordinator hands out a `Ticket` at
once and later emits a `Completion` carrying that ticket and the response.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kio.schema.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_LEADER = ""


@dataclass(frozen=True, slots=True)
class Protocol:
    """One entry of a JoinGroup's protocol list, in the member's order of preference."""

    name: str
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class Ticket:
    """A parked JoinGroup or SyncGroup; its response arrives later as a `Completion`."""

    id: int
    kind: Literal["join", "sync"]
    group_id: str


# -- JoinGroup --


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    # v0 has no rebalance timeout; Kafka then uses the session timeout.
    rebalance_timeout_ms: int
    api_version: int
    client_id: str = ""
    client_host: str = ""
    group_instance_id: str | None = None
    reason: str | None = None

    @property
    def requires_known_member_id(self) -> bool:
        # KIP-394: from v4 a dynamic member must come back with an assigned id.
        return self.api_version >= 4

    @property
    def supports_skip_assignment(self) -> bool:
        # KIP-814: from v9 a rejoining static leader may be told to skip the assignor.
        return self.api_version >= 9


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = NO_LEADER
    skip_assignment: bool = False
    # Only the leader gets the members (with their metadata for the chosen protocol).
    members: tuple[JoinGroupMember, ...] = ()


# -- SyncGroup --


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    # v5+ echo the join response's protocol; None when the client did not send them.
    protocol_type: str | None = None
    protocol_name: str | None = None
    # Only the leader sends assignments: member id -> opaque assignment bytes.
    assignments: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# -- Heartbeat --


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


# -- LeaveGroup --


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    # member_id "" with an instance id removes a static member administratively.
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    # v0-2 carry one member id; v3+ a batch. The I/O layer maps both to this tuple.
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True)
class MemberLeaveResponse:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[MemberLeaveResponse, ...] = ()


# -- Completions --


@dataclass(frozen=True, slots=True)
class Completion:
    """The response for a parked ticket; the I/O layer sends it on the ticket's connection."""

    ticket: Ticket
    response: JoinGroupResponse | SyncGroupResponse
