"""A fake-time driver for the sans-IO coordinator, playing the role of the I/O layer.

It keeps the clock, collects completions after every call (checking each ticket is
answered at most once) and offers one-line helpers for the common request shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import (
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    Protocol,
    SyncGroupRequest,
    SyncGroupResponse,
    Ticket,
)

GROUP = "group-1"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
DEFAULT_PROTOCOLS = (Protocol("range", b"range-meta"),)

# Kafka's defaults apart from no initial delay, which most tests do not care about.
NO_DELAY = GroupConfig(initial_rebalance_delay_ms=0)


class Harness:
    def __init__(self, config: GroupConfig = NO_DELAY, start_ms: int = 1_000_000) -> None:
        self._uuids = 0
        self.coordinator = GroupCoordinator(config, new_uuid=self._next_uuid)
        self.now = start_ms
        self.answers: dict[Ticket, JoinGroupResponse | SyncGroupResponse] = {}
        self.issued: list[Ticket] = []

    def _next_uuid(self) -> str:
        self._uuids += 1
        return f"uuid{self._uuids}"

    # -- the I/O layer's loop --

    def drain(self) -> None:
        for completion in self.coordinator.take_completions():
            assert completion.ticket not in self.answers, f"{completion.ticket} answered twice"
            self.answers[completion.ticket] = completion.response

    def advance(self, ms: int) -> None:
        self.now += ms
        self.coordinator.tick(self.now)
        self.drain()

    def advance_to(self, when_ms: int) -> None:
        self.advance(when_ms - self.now)

    def answer(self, ticket: Ticket) -> Any:
        return self.answers.get(ticket)

    def unanswered(self) -> list[Ticket]:
        return [t for t in self.issued if t not in self.answers]

    # -- requests --

    def join(
        self,
        member_id: str = "",
        *,
        group: str = GROUP,
        client_id: str = "client",
        instance: str | None = None,
        protocols: Sequence[Protocol] = DEFAULT_PROTOCOLS,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        version: int = 9,
    ) -> Ticket:
        request = JoinGroupRequest(
            group_id=group,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=tuple(protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            api_version=version,
            client_id=client_id,
            client_host="/127.0.0.1",
            group_instance_id=instance,
        )
        ticket = self.coordinator.join_group(request, self.now)
        self.issued.append(ticket)
        self.drain()
        return ticket

    def new_member(self, client_id: str = "client", **kwargs: Any) -> tuple[str, Ticket]:
        """KIP-394 round trip: MEMBER_ID_REQUIRED, then the parked rejoin with that id."""
        first = self.answer(self.join("", client_id=client_id, **kwargs))
        assert first.error is ErrorCode.member_id_required, first
        return first.member_id, self.join(first.member_id, client_id=client_id, **kwargs)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: Mapping[str, bytes] | None = None,
        *,
        group: str = GROUP,
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Ticket:
        request = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=dict(assignments or {}),
        )
        ticket = self.coordinator.sync_group(request, self.now)
        self.issued.append(ticket)
        self.drain()
        return ticket

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = GROUP, instance: str | None = None
    ) -> ErrorCode:
        request = HeartbeatRequest(group, generation, member_id, instance)
        error = self.coordinator.heartbeat(request, self.now)
        self.drain()
        return error

    def leave(self, *members: MemberIdentity | str, group: str = GROUP) -> LeaveGroupResponse:
        identities = tuple(
            m if isinstance(m, MemberIdentity) else MemberIdentity(m) for m in members
        )
        response = self.coordinator.leave_group(LeaveGroupRequest(group, identities), self.now)
        self.drain()
        return response

    # -- views --

    def group(self, group: str = GROUP) -> Any:
        return self.coordinator.group(group)

    def state(self, group: str = GROUP) -> str:
        found = self.coordinator.group(group)
        return "missing" if found is None else str(found.state)


def form_stable_group(
    harness: Harness, clients: Sequence[str] = ("a", "b", "c"), **join_kwargs: Any
) -> tuple[list[str], int]:
    """Join `clients` (dynamic members), finish the rebalance and sync; returns ids and
    generation. The first client is the leader and assigns b"<member id>" to everyone."""
    joined = [harness.new_member(client, **join_kwargs) for client in clients]
    harness.advance(0)  # the initial-rebalance timer (delay 0 in NO_DELAY)
    member_ids = [member_id for member_id, _ in joined]
    responses = [harness.answer(ticket) for _, ticket in joined]
    assert all(r is not None and r.error is ErrorCode.none for r in responses), responses
    generation = responses[0].generation_id
    assignments = {m: m.encode() for m in member_ids}
    # Followers first, so they park until the leader's assignment arrives.
    tickets = [harness.sync(m, generation) for m in member_ids[1:]]
    tickets.append(harness.sync(member_ids[0], generation, assignments))
    assert all(harness.answer(t).error is ErrorCode.none for t in tickets)
    assert harness.state() == "Stable"
    return member_ids, generation
