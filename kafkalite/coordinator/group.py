"""A classic group's membership data and invariants, as Kafka's `ClassicGroup`.

This module only keeps the books (members, static ids, pending joins and syncs, leader,
generation, state); deciding *when* to rebalance, timers and responses live in
`rebalance`, `join`, `sync` and friends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.consumer_protocol import subscribed_topics
from kafkalite.coordinator.member import Member
from kafkalite.coordinator.messages import JoinGroupMember, Protocol, Ticket
from kafkalite.coordinator.protocol_selection import select_protocol
from kafkalite.coordinator.states import GroupState, can_rebalance, check_transition

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(slots=True, eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState
    state_timestamp_ms: int
    previous_state: GroupState = GroupState.DEAD
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    # Insertion-ordered, so "the first member" (leader fallback) is the earliest joiner.
    members: dict[str, Member] = field(default_factory=dict)
    # group.instance.id -> member id of the static member currently holding it.
    static_members: dict[str, str] = field(default_factory=dict)
    # KIP-394: ids handed out with MEMBER_ID_REQUIRED whose owners have not rejoined yet.
    pending_join_members: dict[str, None] = field(default_factory=dict)
    # Members that got the join response of this generation but have not sent SyncGroup.
    pending_sync_members: dict[str, None] = field(default_factory=dict)
    # Set when a member joins during the initial (delayed) rebalance, to extend the delay.
    new_member_added: bool = False
    # For "consumer" groups, the union of the members' subscriptions as of the last
    # generation (None: unknown). Decides which committed offsets may expire.
    subscribed_topics: frozenset[str] | None = None

    # -- queries --

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def rebalance_timeout_ms(self) -> int:
        """The group waits for the slowest member: the largest rebalance timeout."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def num_awaiting_join(self) -> int:
        """Members with a parked JoinGroup."""
        return sum(member.is_awaiting_join for member in self.members.values())

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_join_members

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def supports_protocols(self, protocol_type: str, protocol_names: frozenset[str]) -> bool:
        """Whether a member with these protocols could join (else INCONSISTENT_GROUP_PROTOCOL).

        An Empty group takes any non-empty type and list; otherwise the type must match and
        at least one protocol must be supported by every current member.
        """
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            all(name in member.protocol_names for member in self.members.values())
            for name in protocol_names
        )

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            # Unknown subscriptions: a consumer group might use any topic, others use none.
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = subscribed_topics(member.metadata(self.protocol_name))
            if member_topics is None:
                return None
            topics |= member_topics
        return frozenset(topics)

    def select_protocol(self) -> str:
        return select_protocol(list(self.members.values()))

    def current_members(self) -> tuple[JoinGroupMember, ...]:
        """The leader's view in a JoinGroup response: everyone's metadata for the protocol."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"no member metadata for group {self.group_id} in {self.state}")
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """The instance id (if given) must map to this member id, and the member must exist.

        A static instance id now owned by another member id means the caller is a stale
        duplicate of that instance: FENCED_INSTANCE_ID.
        """
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def validate_generation(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Heartbeat's and SyncGroup's checks: a live group, a valid member, its generation."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = self.validate_member(member_id, group_instance_id)
        if error is ErrorCode.none and generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        return error

    # -- transitions --

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.previous_state, self.state = self.state, target
        self.state_timestamp_ms = now_ms

    @property
    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync_members.clear()

    # -- membership changes --

    def add(self, member: Member, join_ticket: Ticket | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} already present")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise RuntimeError("the group and member protocol types must be the same")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_ticket = join_ticket
        self.pending_join_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        """Drop a member (or pending member) and re-elect the leader if it was this one.

        The caller settles the member's parked tickets first (see `rebalance.drop_member`).
        """
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.pop(member_id, None)
        self.pending_sync_members.pop(member_id, None)
        return member

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise RuntimeError(f"{member_id} is already a member")
        self.pending_join_members[member_id] = None

    def update_member(
        self,
        member: Member,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_ticket: Ticket | None,
    ) -> Ticket | None:
        """Apply a rejoin's protocols and timeouts; returns a join ticket it superseded."""
        member.protocols = tuple(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        superseded, member.join_ticket = member.join_ticket, join_ticket
        return superseded

    @staticmethod
    def take_join_ticket(member: Member) -> Ticket | None:
        """Detach the member's parked JoinGroup so the caller can answer it."""
        ticket = member.join_ticket
        member.join_ticket = None
        return ticket

    @staticmethod
    def take_sync_ticket(member: Member) -> Ticket | None:
        ticket = member.sync_ticket
        member.sync_ticket = None
        return ticket

    def replace_static_member(
        self, group_instance_id: str, old_id: str, new_id: str
    ) -> tuple[Member, Member]:
        """A static member restarted with a new member id: same slot, assignment and data.

        Returns (old, new). Kafka keeps the old member's client id and host too. The old
        member object still holds its parked tickets, no longer counted by the group, for
        the caller to fence.
        """
        old = self.members.pop(old_id, None)
        if old is None:
            raise KeyError(f"cannot replace unknown member {old_id}")
        new = Member(
            member_id=new_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[group_instance_id] = new_id
        return old, new
