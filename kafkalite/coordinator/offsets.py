"""Committed offsets of every group, kept in memory (sans-IO: persistence is the caller's).

Like Kafka, offsets live beside the group metadata, keyed by group id, so a simple
consumer (manual assignment, generation -1) can commit without ever joining. Every change
is also queued in `changes` (None: the offset was removed) for the I/O layer to persist in
`__consumer_offsets`; `load` replays a persisted commit without queueing it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

NO_LEADER_EPOCH = -1
INVALID_OFFSET = -1
NO_METADATA = ""


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = NO_METADATA
    commit_timestamp_ms: int = 0
    # Only OffsetCommit v2-v4 carry a retention time; otherwise the broker default applies.
    expire_timestamp_ms: int | None = None


class OffsetChange(NamedTuple):
    group_id: str
    tp: TopicPartition
    value: OffsetAndMetadata | None  # None: removed (a tombstone)


class OffsetStore:
    def __init__(self, changes: list[Any] | None = None) -> None:
        self._by_group: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # Shared with the coordinator's journal when given, to keep one order of changes.
        self.changes: list[Any] = [] if changes is None else changes

    def commit(self, group_id: str, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        self.load(group_id, tp, value)
        self.changes.append(OffsetChange(group_id, tp, value))

    def load(self, group_id: str, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        self._by_group.setdefault(group_id, {})[tp] = value

    def get(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._by_group.get(group_id, {}).get(tp)

    def of_group(self, group_id: str) -> Mapping[TopicPartition, OffsetAndMetadata]:
        return self._by_group.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._by_group.get(group_id))

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> int:
        removed = self.unload(group_id, partitions)
        self.changes.extend(OffsetChange(group_id, tp, None) for tp in removed)
        return len(removed)

    def unload(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Remove without queueing a change (replaying a persisted tombstone)."""
        offsets = self._by_group.get(group_id, {})
        removed = [tp for tp in partitions if offsets.pop(tp, None) is not None]
        if not offsets:
            self._by_group.pop(group_id, None)
        return removed

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def unload_group(self, group_id: str) -> None:
        """Forget the group's offsets without queueing a change (its coordinator moved)."""
        self._by_group.pop(group_id, None)

    def delete_group(self, group_id: str) -> int:
        return self.delete(group_id, list(self.of_group(group_id)))

    def remove_if(
        self, group_id: str, predicate: Callable[[TopicPartition, OffsetAndMetadata], bool]
    ) -> list[TopicPartition]:
        doomed = [tp for tp, value in self.of_group(group_id).items() if predicate(tp, value)]
        self.delete(group_id, doomed)
        return doomed
