"""The state of a KIP-848 consumer group (`group.protocol=consumer`), as Kafka 4 keeps it.

A group has an epoch, bumped whenever what the assignment depends on changes (members,
subscriptions, the partitions of subscribed topics); a target assignment computed for one
group epoch (the assignment epoch); and members, each reconciling towards its target at its
own member epoch. A partition is owned by at most one member at a time: `partition_epochs`
maps each owned partition (assigned or pending revocation) to its owner's epoch, and a
partition is handed to its next owner only once the previous one confirmed the revocation.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

# (topic id, partition): partitions are named by topic id, as on the wire and on disk.
TopicIdPartition = tuple[uuid.UUID, int]
Partitions = frozenset[TopicIdPartition]
NO_PARTITIONS: Partitions = frozenset()

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GROUP_TYPE = "consumer"


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with the values its CurrentMemberAssignment record stores."""

    UNREVOKED_PARTITIONS = 0  # must give partitions up before it gets new ones
    UNRELEASED_PARTITIONS = 1  # waits for partitions other members still own
    STABLE = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the assignment of a subscribed topic depends on."""

    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS

    @property
    def owned(self) -> Partitions:
        """Partitions nobody else may have yet: assigned or not yet revoked."""
        return self.assigned | self.pending_revocation


def matches(regex: str | None, topic: str) -> bool:
    """Kafka matches a subscription regex against whole names, internal topics included."""
    return bool(regex) and re.fullmatch(regex, topic) is not None


def subscribes_to(member: ConsumerMember, topic: str) -> bool:
    return topic in member.subscribed_topic_names or matches(member.subscribed_topic_regex, topic)


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    # member id -> its target assignment at `assignment_epoch`.
    target: dict[str, Partitions] = field(default_factory=dict)
    # Subscribed topics as last recorded (a change bumps the group epoch).
    subscription_metadata: dict[str, TopicInfo] = field(default_factory=dict)
    partition_epochs: dict[TopicIdPartition, int] = field(default_factory=dict)
    # When the group became Empty (or was created): the base of its offsets' expiry.
    empty_since_ms: int = 0

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.state, derived rather than stored."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
            if m.member_epoch >= 0
        ):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topics(self, available: Iterable[str] = ()) -> set[str]:
        """Topics subscribed by name, and those of `available` some member's regex matches."""
        names = {name for m in self.members.values() for name in m.subscribed_topic_names}
        regexes = [m.subscribed_topic_regex for m in self.members.values()]
        if any(regexes):
            names.update(t for t in available if any(matches(r, t) for r in regexes))
        return names

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(subscribes_to(m, topic) for m in self.members.values())

    def member_by_instance_id(self, instance_id: str) -> ConsumerMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def owner_epoch(self, tp: TopicIdPartition) -> int:
        """The epoch of the member owning `tp`, or -1 when it is free."""
        return self.partition_epochs.get(tp, -1)

    # -- keeping partition_epochs in step with the members --

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old.owned)
        self.members[member.member_id] = member
        self._claim(member.owned, member.member_epoch)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member.owned)
        self.target.pop(member_id, None)
        return member

    def rebuild_partition_epochs(self) -> None:
        self.partition_epochs.clear()
        for member in self.members.values():
            self._claim(member.owned, member.member_epoch)

    def _release(self, partitions: Iterable[TopicIdPartition]) -> None:
        for tp in partitions:
            self.partition_epochs.pop(tp, None)

    def _claim(self, partitions: Iterable[TopicIdPartition], epoch: int) -> None:
        for tp in partitions:
            self.partition_epochs[tp] = epoch
