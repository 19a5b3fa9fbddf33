"""One member of a classic group, as Kafka's `ClassicGroupMember`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kafkalite.coordinator.messages import Protocol, Ticket


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    # The parked JoinGroup / SyncGroup of this member, if any (Kafka's awaiting futures).
    join_ticket: Ticket | None = None
    sync_ticket: Ticket | None = None
    # A member that has never completed a join: its session cannot be kept alive by a
    # parked JoinGroup (see `has_satisfied_heartbeat`).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_ticket is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_ticket is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry now should spare this member.

        A member parked in JoinGroup/SyncGroup cannot heartbeat, so the parked request counts
        as liveness, except for new members: their JoinGroup may outlive a client that gave
        up, and Kafka expires them to avoid piling up defunct members.
        """
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    @property
    def protocol_names(self) -> frozenset[str]:
        return frozenset(protocol.name for protocol in self.protocols)

    def metadata(self, protocol_name: str) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Same protocols, metadata and order: a rejoin that changes nothing."""
        return tuple(protocols) == self.protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for protocol in self.protocols:
            if protocol.name in candidates:
                return protocol.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
