"""Share groups (KIP-932): membership, assignment and description, sans-IO (Kafka's
GroupMetadataManager.shareGroupHeartbeat and ShareGroup).

A member joins with epoch 0 and a client-generated member id, heartbeats with the epoch it
was given and leaves with -1. The group epoch is bumped when members or their
subscriptions change, or when a subscribed topic's partition count does; the target
assignment is then recomputed by Kafka's simple assignor (share/simple_assignor.py: with more
members than partitions, several members share a partition), and each member moves to it at
its next heartbeat: share groups have no revocation, since partitions are shared.
A member that does not heartbeat within its session timeout is fenced.

The state is kept in memory (the `__consumer_offsets` records of share groups are not
written yet): after a restart members are asked to rejoin (UNKNOWN_MEMBER_ID).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.consumer_group import Partitions, TopicInfo
from kafkalite.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from kafkalite.share import simple_assignor

# The share heartbeat's answer has the KIP-848 heartbeat's fields, one for one.
ShareGroupHeartbeatResponse = ConsumerGroupHeartbeatResponse

SHARE_GROUP_TYPE = "share"
SHARE_PROTOCOL_TYPE = "share"
SIMPLE_ASSIGNOR = simple_assignor.NAME
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1


class TopicsView(Protocol):
    def by_name(self, name: str) -> TopicInfo | None: ...


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Partitions = frozenset()
    session_deadline_ms: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # member id -> its target assignment at `assignment_epoch`.
    target: dict[str, Partitions] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicInfo] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = str(ShareGroupState.DEAD)
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: tuple[ShareMember, ...] = ()


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error, self.message = error, message


@dataclass(eq=False)
class ShareGroupCoordinator:
    config: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    # A group's own session timeout and heartbeat interval (its group configs), if any.
    group_config: Callable[[str], ShareGroupConfig] | None = None
    groups: dict[str, ShareGroup] = field(default_factory=dict)
    # (group id, member id) of members fenced (session expired) since the last call.
    fenced: list[tuple[str, str]] = field(default_factory=list)

    # -- heartbeat -------------------------------------------------------------------------

    def heartbeat(
        self, request: ShareGroupHeartbeatRequest, topics: TopicsView, now_ms: int
    ) -> ShareGroupHeartbeatResponse:
        try:
            _validate(request)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request, topics, now_ms)
        except _Refused as refused:
            return ShareGroupHeartbeatResponse(refused.error, refused.message)

    def _heartbeat(
        self, request: ShareGroupHeartbeatRequest, topics: TopicsView, now_ms: int
    ) -> ShareGroupHeartbeatResponse:
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _Refused(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {request.group_id}.",
                )
            group = self.groups[request.group_id] = ShareGroup(request.group_id)
        member = group.members.get(request.member_id)
        bump = False
        if member is None:
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _Refused(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {group.group_id}.",
                )
            if len(group.members) >= self.config.max_size:
                raise _Refused(
                    ErrorCode.group_max_size_reached,
                    f"The share group has reached its maximum capacity of "
                    f"{self.config.max_size} members.",
                )
            member = group.members[request.member_id] = ShareMember(request.member_id)
            bump = True
        elif request.member_epoch not in (member.member_epoch, JOIN_GROUP_MEMBER_EPOCH):
            relation = "greater" if request.member_epoch > member.member_epoch else "smaller"
            raise _Refused(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a {relation} member epoch "
                f"({request.member_epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions "
                f"and rejoin.",
            )
        previous_assignment = member.assigned
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            bump = bump or names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        member.rack_id = request.rack_id if request.rack_id is not None else member.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host
        config = self._config(group.group_id)
        member.session_deadline_ms = now_ms + config.session_timeout_ms

        metadata = {
            name: info
            for name in group.subscribed_topics()
            if (info := topics.by_name(name)) is not None
        }
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            _assign(group)
        # No revocation in share groups: the member moves to its target at once.
        member.assigned = group.target.get(member.member_id, frozenset())
        member.member_epoch = group.assignment_epoch
        full = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        # As Kafka: the assignment is sent on a join and when its partitions change.
        changed = previous_assignment != member.assigned
        return ShareGroupHeartbeatResponse(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            assignment=member.assigned if changed or full else None,
        )

    def _config(self, group_id: str) -> ShareGroupConfig:
        return self.config if self.group_config is None else self.group_config(group_id)

    def _leave(self, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
        group = self.groups.get(request.group_id)
        if group is None or request.member_id not in group.members:
            raise _Refused(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        self._remove(group, request.member_id, fenced=False)
        return ShareGroupHeartbeatResponse(
            ErrorCode.none, member_id=request.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
        )

    def _remove(self, group: ShareGroup, member_id: str, *, fenced: bool) -> None:
        """A member leaving closes its share session itself (its last acknowledgements may
        still be on their way); a fenced member's records are released for it."""
        del group.members[member_id]
        group.group_epoch += 1
        _assign(group)
        if fenced:
            self.fenced.append((group.group_id, member_id))

    # -- timers ----------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = [
            m.session_deadline_ms for g in self.groups.values() for m in g.members.values()
        ]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> None:
        """Fence the members whose session expired."""
        for group in self.groups.values():
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now_ms:
                    self._remove(group, member.member_id, fenced=True)

    def take_fenced(self) -> list[tuple[str, str]]:
        fenced, self.fenced = self.fenced, []
        return fenced

    # -- admin -----------------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedShareGroup(
                group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found."
            )
        return DescribedShareGroup(
            group_id,
            ErrorCode.none,
            state=str(group.state),
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            members=tuple(group.members.values()),
        )

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups: only an Empty share group goes."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none

    def listed(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        return [(g.group_id, str(g.state)) for g in self.groups.values()]

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is not None:
                self.fenced.extend((group_id, m) for m in group.members)


def _validate(request: ShareGroupHeartbeatRequest) -> None:
    if not request.group_id:
        raise _Refused(ErrorCode.invalid_request, "GroupId can't be empty.")
    if not request.member_id:
        raise _Refused(ErrorCode.invalid_request, "MemberId can't be empty.")
    if request.rack_id == "":
        raise _Refused(ErrorCode.invalid_request, "RackId can't be empty.")
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not request.subscribed_topic_names:
            raise _Refused(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise _Refused(
            ErrorCode.invalid_request, f"MemberEpoch is invalid: {request.member_epoch}."
        )


def _assign(group: ShareGroup) -> None:
    """A new target assignment by Kafka's simple assignor, sticky to the previous target
    (members take theirs at their next heartbeat)."""
    group.assignment_epoch = group.group_epoch
    partitions_of = {
        name: [(info.topic_id, index) for index in range(info.partitions)]
        for name, info in group.subscription_metadata.items()
    }
    subscriptions = {
        member.member_id: frozenset(member.subscribed_topic_names)
        for member in group.members.values()
    }
    group.target = simple_assignor.assign(subscriptions, partitions_of, group.target)
