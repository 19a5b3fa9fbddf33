"""The KIP-848 consumer group state machine, sans IO: joins, reconciliation (revocation before
reassignment), fencing, leaving, static members, timeouts, metadata changes, offsets and the
classic APIs' view, and replay from the journalled records."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import GroupConfig, GroupCoordinator, OffsetCommitRequest
from kafkalite.coordinator import consumer_group_records as records
from kafkalite.coordinator.consumer_group import MemberState
from kafkalite.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kafkalite.coordinator.consumer_group_records import ConsumerGroupRecord
from kafkalite.coordinator.offset_commit import PartitionCommit
from tests.coordinator.consumer_group_harness import (
    CONFIG,
    GROUP,
    REBALANCE_MS,
    Client,
    Cluster,
    Topics,
)


def group_of(cluster: Cluster):  # noqa: ANN201 - the live ConsumerGroup
    return cluster.coordinator._ctx.consumer_groups[GROUP]


def assert_no_partition_owned_twice(clients: list[Client]) -> None:
    seen: dict = {}
    for client in clients:
        for tp in client.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {client.member_id}"
            seen[tp] = client.member_id


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    topics = Topics(t=3)
    cluster = Cluster(topics)
    a = Client("a", ("t",))
    response = cluster.join(a)
    assert (response.error, response.member_id, response.member_epoch) == (ErrorCode.none, "a", 1)
    assert response.heartbeat_interval_ms == 5_000
    assert response.assignment == topics.all("t")
    group = group_of(cluster)
    assert (group.group_epoch, group.assignment_epoch, str(group.state)) == (1, 1, "Stable")
    # Nothing changed: the next heartbeat carries no assignment.
    assert cluster.heartbeat(a).assignment is None


def test_partitions_move_only_after_the_owner_revokes_them() -> None:
    topics = Topics(t=4)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a)
    joined = cluster.join(b)
    # b is at the new epoch but every partition is still a's: nothing for b yet.
    assert (joined.member_epoch, joined.assignment) == (2, frozenset())
    b_target = group_of(cluster).target["b"]
    assert len(b_target) == 2
    # a is asked to revoke b's share and keeps its epoch until it confirms.
    revoke = cluster.heartbeat(a)
    assert revoke.member_epoch == 1 and revoke.assignment == topics.all("t") - b_target
    assert group_of(cluster).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b still gets nothing: a has not confirmed the revocation.
    assert cluster.heartbeat(b).assignment is None
    assert_no_partition_owned_twice([a, b])
    # a confirms (its heartbeat no longer lists them): a moves to epoch 2, b gets them.
    assert cluster.heartbeat(a).member_epoch == 2
    assert cluster.heartbeat(b).assignment == b_target
    assert_no_partition_owned_twice([a, b])
    cluster.settle([a, b])


def test_an_unconfirmed_revocation_is_not_taken_for_done() -> None:
    """A heartbeat that still lists the revoked partitions keeps the member revoking."""
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a)
    cluster.join(b)
    everything = a.owned
    cluster.heartbeat(a)
    a.owned = everything  # the client has not revoked yet
    assert cluster.heartbeat(a).member_epoch == 1
    assert group_of(cluster).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert cluster.heartbeat(b).assignment is None


def test_fencing_of_stale_and_unknown_members() -> None:
    cluster = Cluster(Topics(t=2))
    a = Client("a", ("t",))
    cluster.join(a)
    a.epoch = 5
    assert cluster.heartbeat(a).error is ErrorCode.fenced_member_epoch
    fenced = cluster.heartbeat(a)
    assert fenced.error_message == (
        "The consumer group member has a greater member epoch (5) than the one known by the "
        "group coordinator (1). The member must abandon all its partitions and rejoin."
    )
    ghost = Client("ghost", ("t",), epoch=1)
    unknown = cluster.heartbeat(ghost)
    assert (unknown.error, unknown.error_message) == (
        ErrorCode.unknown_member_id,
        f"Member ghost is not a member of group {GROUP}.",
    )
    assert cluster.leave(ghost).error is ErrorCode.unknown_member_id


def test_a_heartbeat_for_a_group_that_does_not_exist() -> None:
    cluster = Cluster(Topics(t=1))
    lost = cluster.heartbeat(Client("m", ("t",), epoch=3))
    assert (lost.error, lost.error_message) == (
        ErrorCode.group_id_not_found,
        f"Consumer group {GROUP} not found.",
    )


def test_a_member_that_missed_its_epoch_bump_may_retry_with_the_previous_epoch() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a)
    cluster.join(b)
    cluster.heartbeat(a)  # revoke
    cluster.heartbeat(a)  # a moves to epoch 2; say the response is lost
    a.epoch = 1
    response = cluster.heartbeat(a)
    assert (response.error, response.member_epoch) == (ErrorCode.none, 2)
    # With partitions it was never given, the old epoch is fenced.
    a.epoch, a.owned = 1, topics.all("t")
    assert cluster.heartbeat(a).error is ErrorCode.fenced_member_epoch


def test_leave_frees_the_partitions_for_the_others() -> None:
    topics = Topics(t=4)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a)
    cluster.join(b)
    cluster.settle([a, b])
    epoch = group_of(cluster).group_epoch
    response = cluster.leave(b)
    assert (response.error, response.member_id, response.member_epoch) == (ErrorCode.none, "b", -1)
    assert group_of(cluster).group_epoch == epoch + 1
    assert cluster.heartbeat(a).assignment == topics.all("t")
    cluster.leave(a)
    assert str(group_of(cluster).state) == "Empty"


def test_session_timeout_fences_a_silent_member() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a)
    cluster.join(b)
    cluster.settle([a, b])
    cluster.advance(40_000)
    cluster.heartbeat(a)  # a stays alive; b is silent
    cluster.advance(5_001)
    assert set(group_of(cluster).members) == {"a"}
    assert cluster.heartbeat(b).error is ErrorCode.unknown_member_id
    assert cluster.heartbeat(a).assignment == topics.all("t")


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a)
    cluster.join(b)
    everything = a.owned
    cluster.heartbeat(a)
    for _ in range(3):  # a keeps heartbeating but never lets go
        a.owned = everything
        cluster.advance(REBALANCE_MS // 4)
        cluster.heartbeat(a)
        cluster.heartbeat(b)
    cluster.advance(REBALANCE_MS // 4 + 1)
    assert set(group_of(cluster).members) == {"b"}
    cluster.settle([b])
    assert b.owned == topics.all("t")


def test_static_member_comes_back_to_its_partitions_without_a_rebalance() -> None:
    topics = Topics(t=4)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",), instance_id="i-a"), Client("b", ("t",), instance_id="i-b")
    cluster.join(a)
    cluster.join(b)
    cluster.settle([a, b])
    owned, epoch = b.owned, group_of(cluster).group_epoch
    assert cluster.leave(b, epoch=-2).member_epoch == -2
    # Someone else with the same instance id while b is away: takes b's place.
    b2 = Client("b2", ("t",), instance_id="i-b")
    response = cluster.join(b2)
    assert response.error is ErrorCode.none and response.assignment == owned
    assert group_of(cluster).group_epoch == epoch
    assert set(group_of(cluster).members) == {"a", "b2"}
    # A second live member with that instance id is refused.
    b3 = Client("b3", ("t",), instance_id="i-b")
    assert cluster.join(b3).error is ErrorCode.unreleased_instance_id


def test_new_partitions_are_assigned_on_the_next_heartbeat() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a = Client("a", ("t",))
    cluster.join(a)
    topics.set("t", 3)
    response = cluster.heartbeat(a)
    assert response.member_epoch == 2 and response.assignment == topics.all("t")


def test_a_topic_created_after_the_subscription_is_assigned() -> None:
    topics = Topics()
    cluster = Cluster(topics)
    a = Client("a", ("later",))
    assert cluster.join(a).assignment == frozenset()
    topics.set("later", 2)
    assert cluster.heartbeat(a).assignment == topics.all("later")


def test_regex_subscriptions_follow_the_topics_that_match() -> None:
    topics = Topics(orders=2, other=1)
    cluster = Cluster(topics)
    a = Client("a", ())
    assert cluster.join(a, subscribed_topic_regex="ord.*").assignment == topics.all("orders")
    topics.set("ordinals", 1)
    assert cluster.heartbeat(a).assignment == topics.all("orders") | topics.all("ordinals")
    assert group_of(cluster).is_subscribed_to_topic("ordinals")
    bad = cluster.join(Client("b", ()), subscribed_topic_regex="(")
    assert bad.error is ErrorCode.invalid_regular_expression


def test_range_assignor_when_members_ask_for_it() -> None:
    topics = Topics(t=5)
    cluster = Cluster(topics)
    a, b = Client("a", ("t",)), Client("b", ("t",))
    cluster.join(a, server_assignor="range")
    cluster.join(b, server_assignor="range")
    cluster.settle([a, b])
    assert a.owned == {topics.tp("t", p) for p in range(3)}
    assert b.owned == {topics.tp("t", p) for p in (3, 4)}


def test_invalid_requests() -> None:
    cluster = Cluster(Topics(t=1))

    def error(**fields: object) -> tuple[ErrorCode, str | None]:
        base: dict = {
            "group_id": GROUP,
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": REBALANCE_MS,
            "subscribed_topic_names": ("t",),
        }
        response = cluster.send(ConsumerGroupHeartbeatRequest(**{**base, **fields}))
        return response.error, response.error_message

    assert error(group_id="") == (ErrorCode.invalid_request, "GroupId can't be empty.")
    assert error(member_id="") == (ErrorCode.invalid_request, "MemberId can't be empty.")
    assert error(rebalance_timeout_ms=-1)[0] is ErrorCode.invalid_request
    assert error(subscribed_topic_names=None)[0] is ErrorCode.invalid_request
    assert error(member_epoch=-2)[0] is ErrorCode.invalid_request
    assert error(server_assignor="sticky")[0] is ErrorCode.unsupported_assignor
    # v0: the coordinator names a member that joins without an id.
    assert cluster.send(
        ConsumerGroupHeartbeatRequest(
            GROUP, "", 0, api_version=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)
        )
    ).member_id


def test_group_max_size() -> None:
    cluster = Cluster(Topics(t=1), GroupConfig(consumer_max_size=1))
    cluster.join(Client("a", ("t",)))
    assert cluster.join(Client("b", ("t",))).error is ErrorCode.group_max_size_reached


def test_a_group_id_is_either_classic_or_consumer() -> None:
    from tests.coordinator.coordinator_harness import GROUP as CLASSIC
    from tests.coordinator.coordinator_harness import Harness, form_stable_group

    harness = Harness()
    form_stable_group(harness, ("a",))
    response = harness.coordinator.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            CLASSIC, "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)
        ),
        Topics(t=1),
        harness.now,
    )
    assert response.error is ErrorCode.group_id_not_found


def test_offset_commits_of_a_consumer_group_check_the_member_epoch() -> None:
    topics = Topics(t=1)
    cluster = Cluster(topics)
    a = Client("a", ("t",))
    cluster.join(a)

    def commit(member_id: str, epoch: int, version: int = 9) -> ErrorCode:
        response = cluster.coordinator.commit_offsets(
            OffsetCommitRequest(GROUP, (PartitionCommit("t", 0, 5),), version, epoch, member_id),
            cluster.now,
        )
        return response.partitions[0].error

    assert commit("a", 1) is ErrorCode.none
    assert commit("a", 0) is ErrorCode.stale_member_epoch
    assert commit("b", 1) is ErrorCode.unknown_member_id
    assert commit("a", 1, version=8) is ErrorCode.unsupported_version
    assert commit("", -1) is ErrorCode.unknown_member_id  # a live group refuses outsiders
    cluster.leave(a)
    assert commit("", -1) is ErrorCode.none  # the admin client, once the group is empty
    assert cluster.coordinator.fetch_offsets(GROUP).partitions[0].offset == 5


def test_classic_admin_apis_see_consumer_groups() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a = Client("a", ("t",))
    cluster.join(a)
    coordinator = cluster.coordinator
    listed = coordinator.list_groups(types=["consumer"])
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [
        (GROUP, "consumer", "Stable", "consumer")
    ]
    assert coordinator.list_groups(types=["classic"]) == []
    # DescribeGroups does not describe consumer groups (as Kafka 4 without classic members).
    assert (
        coordinator.describe_group(GROUP, 5).state,
        coordinator.describe_group(GROUP, 5).members,
    ) == ("Dead", ())
    described = coordinator.describe_group(GROUP, 6)
    assert (described.error, described.error_message) == (
        ErrorCode.group_id_not_found,
        f"Group {GROUP} is not a classic group.",
    )
    assert coordinator.delete_groups([GROUP], cluster.now) == {GROUP: ErrorCode.non_empty_group}
    cluster.leave(a)
    assert coordinator.delete_groups([GROUP], cluster.now) == {GROUP: ErrorCode.none}
    assert coordinator.consumer_group_describe(GROUP).error is ErrorCode.group_id_not_found


def test_consumer_group_describe() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a = Client("a", ("t",))
    cluster.join(a, server_assignor="range")
    described = cluster.coordinator.consumer_group_describe(GROUP)
    assert (described.error, described.state, described.group_epoch) == (
        ErrorCode.none,
        "Stable",
        1,
    )
    assert described.assignor_name == "range"
    (member,) = described.members
    assert [(t.topic_name, t.partitions) for t in member.assignment] == [("t", (0, 1))]
    assert cluster.coordinator.consumer_group_describe("").error is ErrorCode.invalid_group_id


def replayed(cluster: Cluster) -> GroupCoordinator:
    """A new coordinator fed the journal as bytes, as the broker replays `__consumer_offsets`."""
    fresh = GroupCoordinator(CONFIG)
    for change in cluster.coordinator.take_changes():
        if isinstance(change, ConsumerGroupRecord):
            key = records.decode_key(change.key)
            assert key is not None
            fresh.load_consumer_group_record(key, change.value, cluster.now)
    return fresh


def test_replay_restores_epochs_members_and_assignments() -> None:
    topics = Topics(t=3, u=1)
    cluster = Cluster(topics)
    a, b, c = Client("a", ("t", "u")), Client("b", ("t",)), Client("c", ("t",))
    for client in (a, b, c):
        cluster.join(client)
    cluster.settle([a, b, c])
    cluster.leave(c)
    cluster.heartbeat(a)
    cluster.heartbeat(b)  # mid-reconciliation
    before = group_of(cluster)
    after = replayed(cluster)._ctx.consumer_groups[GROUP]
    assert (after.group_epoch, after.assignment_epoch) == (
        before.group_epoch,
        before.assignment_epoch,
    )
    assert after.members == before.members
    assert after.target == before.target
    assert after.subscription_metadata == before.subscription_metadata
    assert after.partition_epochs == before.partition_epochs


def test_replayed_members_keep_heartbeating_at_their_epoch() -> None:
    topics = Topics(t=2)
    cluster = Cluster(topics)
    a = Client("a", ("t",))
    cluster.join(a)
    cluster.coordinator = replayed(cluster)
    response = cluster.heartbeat(a)
    assert (response.error, response.member_epoch) == (ErrorCode.none, 1)


def test_replay_of_a_deleted_group_leaves_nothing() -> None:
    cluster = Cluster(Topics(t=1))
    a = Client("a", ("t",))
    cluster.join(a)
    cluster.leave(a)
    cluster.coordinator.delete_groups([GROUP], cluster.now)
    assert replayed(cluster)._ctx.consumer_groups == {}


# -- any sequence of joins, heartbeats, leaves and new partitions -----------------------------

ACTIONS = st.lists(
    st.tuples(st.sampled_from(["join", "heartbeat", "leave", "grow"]), st.integers(0, 4)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(actions=ACTIONS, assignor=st.sampled_from(["uniform", "range"]))
def test_no_partition_ever_has_two_owners_and_the_group_converges(
    actions: list[tuple[str, int]], assignor: str
) -> None:
    topics = Topics(t=3, u=2)
    cluster = Cluster(topics)
    clients = [Client(f"m{i}", ("t", "u") if i % 2 else ("t",)) for i in range(5)]
    joined: set[int] = set()
    for action, index in actions:
        client = clients[index]
        if action == "join" and index not in joined:
            assert cluster.join(client, server_assignor=assignor).error is ErrorCode.none
            joined.add(index)
        elif action == "heartbeat" and index in joined:
            assert cluster.heartbeat(client).error is ErrorCode.none
        elif action == "leave" and index in joined:
            assert cluster.leave(client).error is ErrorCode.none
            joined.discard(index)
        elif action == "grow":
            topics.set("t", topics.infos["t"].partitions + 1)
        assert_no_partition_owned_twice([clients[i] for i in joined])
    members = [clients[i] for i in sorted(joined)]
    if not members:
        return
    cluster.settle(members, rounds=4)
    owned = [c.owned for c in members]
    subscribed = {name for c in members for name in c.topics}
    assert frozenset().union(*owned) == frozenset().union(*(topics.all(n) for n in subscribed))
    assert_no_partition_owned_twice(members)
