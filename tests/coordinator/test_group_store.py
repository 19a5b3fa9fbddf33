"""Group metadata persistence: what the coordinator journals and how replay restores it."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import (
    GroupCoordinator,
    HeartbeatRequest,
    OffsetCommitRequest,
    PartitionCommit,
    TopicPartition,
)
from kafkalite.coordinator.group_snapshot import GroupChange
from kafkalite.coordinator.offsets import OffsetAndMetadata, OffsetChange
from kafkalite.coordinator.timers import TimerKind
from tests.coordinator.coordinator_harness import (
    GROUP,
    NO_DELAY,
    Harness,
    form_stable_group,
)


def group_changes(changes: list) -> list[GroupChange]:
    return [c for c in changes if isinstance(c, GroupChange)]


def replay(changes: list, now_ms: int) -> GroupCoordinator:
    """A fresh coordinator fed the journal, as the broker replays `__consumer_offsets`."""
    restored = GroupCoordinator(NO_DELAY)
    for change in changes:
        if isinstance(change, GroupChange):
            restored.load_group(change.group_id, change.value, now_ms)
        else:
            restored.load_offset(change.group_id, change.tp, change.value, now_ms)
    return restored


def test_the_leaders_sync_journals_the_stable_group_with_assignments() -> None:
    harness = Harness()
    members, generation = form_stable_group(harness)
    stored = group_changes(harness.coordinator.take_changes())
    assert len(stored) == 1
    value = stored[0].value
    assert value is not None
    assert value.generation == generation
    assert value.protocol_name == "range"
    assert value.leader == members[0]
    assert [m.member_id for m in value.members] == members
    assert [m.assignment for m in value.members] == [m.encode() for m in members]
    assert all(m.subscription == b"range-meta" for m in value.members)


def test_replay_restores_a_stable_group_that_keeps_heartbeating() -> None:
    harness = Harness()
    members, generation = form_stable_group(harness)
    restored = replay(harness.coordinator.take_changes(), harness.now)
    group = restored.group(GROUP)
    assert group is not None
    assert str(group.state) == "Stable"
    assert group.generation_id == generation
    assert group.leader_id == members[0]
    assert [group.members[m].assignment for m in members] == [m.encode() for m in members]
    # Every member has a session again, so it can heartbeat on and expire if it is gone.
    sessions = [t for t in restored.timers() if t.kind is TimerKind.HEARTBEAT]
    assert sorted(t.member_id for t in sessions) == sorted(members)
    answer = restored.heartbeat(HeartbeatRequest(GROUP, generation, members[1]), harness.now)
    assert answer is ErrorCode.none


def test_an_emptied_group_is_journaled_empty_and_replays_empty() -> None:
    harness = Harness()
    members, _ = form_stable_group(harness, clients=("a",))
    harness.leave(members[0])
    changes = harness.coordinator.take_changes()
    last = group_changes(changes)[-1].value
    assert last is not None and last.members == ()
    restored = replay(changes, harness.now)
    assert str(restored.group(GROUP).state) == "Empty"


def test_deleting_a_group_journals_offset_and_group_tombstones() -> None:
    harness = Harness()
    coordinator = harness.coordinator
    coordinator.commit_offsets(
        OffsetCommitRequest(GROUP, (PartitionCommit("t", 0, 5),), api_version=9), harness.now
    )
    assert coordinator.delete_groups([GROUP], harness.now) == {GROUP: ErrorCode.none}
    changes = coordinator.take_changes()
    assert changes[-2:] == [
        OffsetChange(GROUP, TopicPartition("t", 0), None),
        GroupChange(GROUP, None),
    ]
    restored = replay(changes, harness.now)
    assert restored.group(GROUP) is None
    assert restored.committed(GROUP, TopicPartition("t", 0)) is None


def test_replayed_offsets_are_not_journaled_again() -> None:
    coordinator = GroupCoordinator(NO_DELAY)
    value = OffsetAndMetadata(7, 3, "meta", 1_000)
    coordinator.load_offset("g", TopicPartition("t", 1), value, 2_000)
    assert coordinator.take_changes() == []
    assert coordinator.committed("g", TopicPartition("t", 1)) == value
    coordinator.load_offset("g", TopicPartition("t", 1), None, 2_000)
    assert coordinator.committed("g", TopicPartition("t", 1)) is None
    assert coordinator.take_changes() == []
