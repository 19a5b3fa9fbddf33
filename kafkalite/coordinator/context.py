"""What the request handlers share: settings, groups, timers and the completion outbox."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from kafkalite.coordinator.config import GroupConfig
from kafkalite.coordinator.consumer_group import ConsumerGroup
from kafkalite.coordinator.consumer_group_records import ConsumerGroupRecord
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.group_snapshot import GroupChange, snapshot
from kafkalite.coordinator.messages import (
    Completion,
    JoinGroupResponse,
    SyncGroupResponse,
    Ticket,
)
from kafkalite.coordinator.offsets import OffsetChange, OffsetStore
from kafkalite.coordinator.states import GroupState
from kafkalite.coordinator.timers import Timers


def random_uuid() -> str:
    return str(uuid.uuid4())


@dataclass(slots=True)
class Context:
    config: GroupConfig
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    # KIP-848 consumer groups; a group id is in `groups` or here, never both.
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    # What must reach `__consumer_offsets`, in order: offset and group metadata changes.
    journal: list[OffsetChange | GroupChange | ConsumerGroupRecord] = field(default_factory=list)
    offsets: OffsetStore = field(init=False)
    timers: Timers = field(default_factory=Timers)
    outbox: list[Completion] = field(default_factory=list)
    # Injected so tests (and replays) get deterministic member ids.
    new_uuid: Callable[[], str] = random_uuid
    _ticket_ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.offsets = OffsetStore(self.journal)

    def store_group(self, group: ClassicGroup) -> None:
        """Queue the group's metadata for persistence (Kafka's storeGroup)."""
        self.journal.append(GroupChange(group.group_id, snapshot(group)))

    def issue(self, kind: Literal["join", "sync"], group_id: str) -> Ticket:
        return Ticket(next(self._ticket_ids), kind, group_id)

    def complete(
        self, ticket: Ticket | None, response: JoinGroupResponse | SyncGroupResponse
    ) -> None:
        """Queue the response of a parked request (no-op when nothing was parked)."""
        if ticket is not None:
            self.outbox.append(Completion(ticket, response))

    def remove_group(self, group: ClassicGroup, now_ms: int) -> None:
        """Retire an Empty group: Dead, out of the table, its timers and offsets gone."""
        group.transition_to(GroupState.DEAD, now_ms)
        self.groups.pop(group.group_id, None)
        self.timers.cancel_group(group.group_id)
        self.offsets.delete_group(group.group_id)
        self.journal.append(GroupChange(group.group_id, None))
