"""Share group membership (sans-IO): joining, epochs, fencing, the simple assignor, leaving."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from kafkalite.coordinator.consumer_group import TopicInfo
from kafkalite.share.share_group import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupHeartbeatRequest,
)

TOPIC = TopicInfo(uuid.UUID(int=7), "queue", 2)


class Topics:
    def __init__(self, *topics: TopicInfo) -> None:
        self.topics = {t.name: t for t in topics}

    def by_name(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)


def beat(
    coordinator: ShareGroupCoordinator,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = None,
    now: int = 0,
    view: Topics | None = None,
):  # noqa: ANN201
    request = ShareGroupHeartbeatRequest("g", member, epoch, subscribed_topic_names=topics)
    return coordinator.heartbeat(request, view or Topics(TOPIC), now)


def test_members_join_and_the_simple_assignor_splits_or_shares() -> None:
    coordinator = ShareGroupCoordinator()
    first = beat(coordinator, "m1", 0, ("queue",))
    assert (first.error, first.member_epoch) == (ErrorCode.none, 1)
    assert first.assignment == {(TOPIC.topic_id, 0), (TOPIC.topic_id, 1)}
    second = beat(coordinator, "m2", 0, ("queue",))
    assert second.member_epoch == 2 and second.assignment is not None
    # m1 moves to the new epoch at its next heartbeat, keeping the partition m2 did not get.
    again = beat(coordinator, "m1", 1)
    assert again.member_epoch == 2 and again.assignment is not None
    assert again.assignment | second.assignment == first.assignment
    assert not again.assignment & second.assignment
    # A third member on two partitions: each partition is shared by two members.
    beat(coordinator, "m3", 0, ("queue",))
    members = coordinator.describe("g").members
    shared = [m.assigned for m in members if m.member_id == "m3"][0]
    assert len(shared) == 1
    unchanged = beat(coordinator, "m2", 2)
    assert unchanged.member_epoch == 3


def test_a_new_partition_reaches_members_at_their_next_heartbeat() -> None:
    coordinator = ShareGroupCoordinator()
    beat(coordinator, "m1", 0, ("queue",))
    grown = Topics(TopicInfo(TOPIC.topic_id, "queue", 3))
    response = beat(coordinator, "m1", 1, view=grown)
    assert response.member_epoch == 2
    assert response.assignment is not None and len(response.assignment) == 3


def test_epochs_and_unknown_members_are_refused() -> None:
    coordinator = ShareGroupCoordinator()
    beat(coordinator, "m1", 0, ("queue",))
    assert beat(coordinator, "m1", 7).error is ErrorCode.fenced_member_epoch
    assert beat(coordinator, "m9", 3).error is ErrorCode.unknown_member_id
    assert beat(coordinator, "m9", 0).error is ErrorCode.invalid_request  # no subscription
    empty = ShareGroupHeartbeatRequest("g", "", 0, subscribed_topic_names=("queue",))
    assert coordinator.heartbeat(empty, Topics(TOPIC), 0).error is ErrorCode.invalid_request


def test_leaving_and_session_expiry() -> None:
    coordinator = ShareGroupCoordinator(ShareGroupConfig(session_timeout_ms=100))
    beat(coordinator, "m1", 0, ("queue",), now=0)
    beat(coordinator, "m2", 0, ("queue",), now=0)
    assert beat(coordinator, "m2", -1).member_epoch == -1
    assert coordinator.take_fenced() == []  # a leaving member closes its session itself
    assert coordinator.next_deadline() == 100
    coordinator.tick(99)
    assert coordinator.describe("g").state == "Stable"
    coordinator.tick(100)
    assert coordinator.take_fenced() == [("g", "m1")]
    described = coordinator.describe("g")
    assert (described.state, described.members, described.group_epoch) == ("Empty", (), 4)
    assert coordinator.describe("other").error is ErrorCode.group_id_not_found


def test_only_an_empty_group_is_deleted() -> None:
    coordinator = ShareGroupCoordinator()
    beat(coordinator, "m1", 0, ("queue",))
    assert coordinator.delete("g") is ErrorCode.non_empty_group
    beat(coordinator, "m1", -1)
    assert coordinator.delete("g") is ErrorCode.none
    assert coordinator.delete("g") is ErrorCode.group_id_not_found
