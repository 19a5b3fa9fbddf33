"""Consumer-group APIs on the wire, against the shared broker process.

What the in-process tests (tests/apis/test_group_apis.py) cannot show: the advertised
versions, a whole member lifecycle framed with the flexible versions, and that a JoinGroup
parked on one connection neither blocks other connections nor, once its connection is
gone, the group. Waits are on the broker's answers only: the first join of a new group
waits out the broker's group.initial.rebalance.delay.ms, and "the newcomer's JoinGroup is
parked" is observed through DescribeGroups, never assumed after a sleep.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from protocol_tests.raw_client import (
    RawClient,
    api_versions_request,
    build,
    response_class,
    unique_name,
)

NONE = 0
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
GROUP_ID_NOT_FOUND = 69

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
# Kafka 4's ranges (OffsetCommit 0-1 and OffsetFetch 0 went with KIP-896).
GROUP_API_VERSIONS = {
    JOIN_GROUP: (0, 9),
    SYNC_GROUP: (0, 5),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    OFFSET_COMMIT: (2, 10),
    OFFSET_FETCH: (1, 10),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
}

SESSION_MS = 10_000
REBALANCE_MS = 30_000
META = b"\x00\x01subscription"
STATE_WAIT_S = 10.0


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


# -- requests (the highest, flexible, versions unless told) --------------------------------------


def join_request(group: str, member_id: str = "", version: int = 9) -> Any:
    protocol = build(JOIN_GROUP, version, "JoinGroupRequestProtocol", name="range", metadata=META)
    return build(
        JOIN_GROUP,
        version,
        "JoinGroupRequest",
        group_id=group,
        session_timeout=_ms(SESSION_MS),
        rebalance_timeout=_ms(REBALANCE_MS),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
        reason=None,
    )


def sync_request(
    group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None
) -> Any:
    return build(
        SYNC_GROUP,
        5,
        "SyncGroupRequest",
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=tuple(
            build(SYNC_GROUP, 5, "SyncGroupRequestAssignment", member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ),
    )


def heartbeat_request(group: str, generation: int, member_id: str) -> Any:
    return build(
        HEARTBEAT,
        4,
        "HeartbeatRequest",
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )


def leave_request(group: str, *member_ids: str) -> Any:
    members = tuple(
        build(LEAVE_GROUP, 5, "MemberIdentity", member_id=m, group_instance_id=None, reason="done")
        for m in member_ids
    )
    return build(LEAVE_GROUP, 5, "LeaveGroupRequest", group_id=group, members=members)


def commit_request(
    group: str, generation: int, member_id: str, topic: str, offset: int, metadata: str
) -> Any:
    partition = build(
        OFFSET_COMMIT,
        9,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=offset,
        committed_leader_epoch=0,
        committed_metadata=metadata,
    )
    return build(
        OFFSET_COMMIT,
        9,
        "OffsetCommitRequest",
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=(
            build(
                OFFSET_COMMIT, 9, "OffsetCommitRequestTopic", name=topic, partitions=(partition,)
            ),
        ),
    )


def fetch_request(group: str, topic: str | None) -> Any:
    topics = (
        None
        if topic is None
        else (
            build(OFFSET_FETCH, 9, "OffsetFetchRequestTopics", name=topic, partition_indexes=(0,)),
        )
    )
    fetched_group = build(
        OFFSET_FETCH,
        9,
        "OffsetFetchRequestGroup",
        group_id=group,
        member_id=None,
        member_epoch=-1,
        topics=topics,
    )
    return build(
        OFFSET_FETCH, 9, "OffsetFetchRequest", groups=(fetched_group,), require_stable=True
    )


def describe_request(*groups: str) -> Any:
    return build(
        DESCRIBE_GROUPS,
        6,
        "DescribeGroupsRequest",
        groups=groups,
        include_authorized_operations=False,
    )


# -- helpers ---------------------------------------------------------------------------------------


def join_new(client: RawClient, group: str) -> Any:
    """KIP-394: MEMBER_ID_REQUIRED with an id, then the join with it (which may wait)."""
    first = client.request(join_request(group))
    assert first.error_code == MEMBER_ID_REQUIRED
    assert first.member_id.startswith("kafkalite-raw-")
    return client.request(join_request(group, first.member_id))


def stable_single(client: RawClient, group: str) -> Any:
    """One member forms the group and syncs: Stable, generation 1. Its join response."""
    joined = join_new(client, group)
    assert (joined.error_code, joined.generation_id, joined.leader) == (
        NONE,
        1,
        joined.member_id,
    )
    synced = client.request(sync_request(group, 1, joined.member_id, {joined.member_id: b"all"}))
    assert (synced.error_code, synced.assignment) == (NONE, b"all")
    return joined


def group_state(client: RawClient, group: str) -> str:
    (described,) = client.request(describe_request(group)).groups
    return described.group_state


def wait_for_state(client: RawClient, group: str, state: str) -> None:
    """Ask DescribeGroups until the group reaches `state` (a newcomer's JoinGroup arrived)."""
    deadline = time.monotonic() + STATE_WAIT_S
    seen = group_state(client, group)
    while seen != state:
        assert time.monotonic() < deadline, f"group {group} stuck in {seen}, not {state}"
        seen = group_state(client, group)


def park_newcomer(client: RawClient, group: str) -> tuple[str, int]:
    """A second member's JoinGroup, parked: (its member id, the parked correlation id)."""
    first = client.request(join_request(group))
    assert first.error_code == MEMBER_ID_REQUIRED
    return first.member_id, client.send(join_request(group, first.member_id))


def receive_join(client: RawClient, correlation_id: int) -> Any:
    got, response = client.recv(response_class(JOIN_GROUP, 9))
    assert got == correlation_id
    return response


# -- tests -----------------------------------------------------------------------------------------


def test_api_versions_advertises_kafka4_group_api_ranges(client: RawClient) -> None:
    response = client.request(api_versions_request(3))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: advertised.get(key) for key in GROUP_API_VERSIONS} == GROUP_API_VERSIONS


def test_member_lifecycle_with_flexible_versions(
    client: RawClient, new_topic: Callable[..., tuple[str, Any]]
) -> None:
    topic, _ = new_topic("groups")
    group = unique_name("wire-group")

    locate = build(
        FIND_COORDINATOR, 4, "FindCoordinatorRequest", key_type=0, coordinator_keys=(group,)
    )
    (coordinator,) = client.request(locate).coordinators
    assert (coordinator.key, coordinator.error_code, coordinator.port) == (
        group,
        NONE,
        client.sock.getpeername()[1],
    )

    joined = join_new(client, group)  # JoinGroup v9
    member = joined.member_id
    assert (joined.error_code, joined.generation_id, joined.leader) == (NONE, 1, member)
    assert (joined.protocol_type, joined.protocol_name, joined.skip_assignment) == (
        "consumer",
        "range",
        False,
    )
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, META)]

    synced = client.request(sync_request(group, 1, member, {member: b"assignment"}))
    assert (synced.error_code, synced.assignment) == (NONE, b"assignment")
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    assert client.request(heartbeat_request(group, 1, member)).error_code == NONE

    committed = client.request(commit_request(group, 1, member, topic, 42, "checkpoint"))
    assert [(t.name, [p.error_code for p in t.partitions]) for t in committed.topics] == [
        (topic, [NONE])
    ]
    for wanted in (topic, None):  # named partitions, then everything the group committed
        (fetched,) = client.request(fetch_request(group, wanted)).groups
        assert (fetched.group_id, fetched.error_code) == (group, NONE)
        assert [
            (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in fetched.topics
            for p in t.partitions
        ] == [(topic, 0, 42, 0, "checkpoint")]

    (described,) = client.request(describe_request(group)).groups
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    assert [(m.member_id, m.member_assignment) for m in described.members] == [
        (member, b"assignment")
    ]
    listed = client.request(
        build(LIST_GROUPS, 5, "ListGroupsRequest", states_filter=("Stable",), types_filter=())
    )
    assert (group, "Stable", "classic") in [
        (g.group_id, g.group_state, g.group_type) for g in listed.groups
    ]

    left = client.request(leave_request(group, member))
    assert left.error_code == NONE
    assert [(m.member_id, m.error_code) for m in left.members] == [(member, NONE)]
    assert group_state(client, group) == "Empty"
    assert client.request(heartbeat_request(group, 1, member)).error_code == UNKNOWN_MEMBER_ID

    # An Empty group's offsets may go (OffsetDelete v0 is not flexible), then the group.
    partition = build(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0)
    deleted = client.request(
        build(
            OFFSET_DELETE,
            0,
            "OffsetDeleteRequest",
            group_id=group,
            topics=(
                build(
                    OFFSET_DELETE,
                    0,
                    "OffsetDeleteRequestTopic",
                    name=topic,
                    partitions=(partition,),
                ),
            ),
        )
    )
    assert deleted.error_code == NONE
    assert [p.error_code for t in deleted.topics for p in t.partitions] == [NONE]
    (fetched,) = client.request(fetch_request(group, None)).groups
    assert fetched.topics == ()
    removed = client.request(build(DELETE_GROUPS, 2, "DeleteGroupsRequest", groups_names=(group,)))
    assert [(r.group_id, r.error_code) for r in removed.results] == [(group, NONE)]
    (described,) = client.request(describe_request(group)).groups
    assert (described.error_code, described.group_state) == (GROUP_ID_NOT_FOUND, "Dead")


def test_parked_join_does_not_block_other_connections(
    connect: Callable[..., RawClient],
) -> None:
    group = unique_name("wire-parked")
    first, second, observer = connect(), connect(), connect()
    a = stable_single(first, group)

    b_member, b_join = park_newcomer(second, group)
    wait_for_state(observer, group, "PreparingRebalance")

    # While B's JoinGroup is parked, other connections are served: A learns it must rejoin,
    # and unrelated requests are answered.
    assert first.request(heartbeat_request(group, 1, a.member_id)).error_code == (
        REBALANCE_IN_PROGRESS
    )
    assert observer.request(api_versions_request(3)).error_code == NONE

    rejoined = first.request(join_request(group, a.member_id))  # completes the join phase
    b = receive_join(second, b_join)
    assert rejoined.error_code == b.error_code == NONE
    assert rejoined.generation_id == b.generation_id == 2
    assert rejoined.leader == b.leader == a.member_id
    assert b.member_id == b_member
    assert sorted(m.member_id for m in rejoined.members) == sorted([a.member_id, b_member])
    assert b.members == ()

    # B's SyncGroup waits for the leader's; both get their share.
    b_sync = second.send(sync_request(group, 2, b_member))
    leader_sync = first.request(
        sync_request(group, 2, a.member_id, {a.member_id: b"part-a", b_member: b"part-b"})
    )
    got, follower_sync = second.recv(response_class(SYNC_GROUP, 5))
    assert got == b_sync
    assert (leader_sync.error_code, leader_sync.assignment) == (NONE, b"part-a")
    assert (follower_sync.error_code, follower_sync.assignment) == (NONE, b"part-b")
    assert first.request(heartbeat_request(group, 2, a.member_id)).error_code == NONE
    assert second.request(heartbeat_request(group, 2, b_member)).error_code == NONE

    left = first.request(leave_request(group, a.member_id, b_member))
    assert [m.error_code for m in left.members] == [NONE, NONE]
    assert group_state(observer, group) == "Empty"


def test_closing_a_parked_join_connection_leaves_the_group_usable(
    connect: Callable[..., RawClient], new_topic: Callable[..., tuple[str, Any]]
) -> None:
    topic, _ = new_topic("groups")
    group = unique_name("wire-closed")
    first, second, observer = connect(), connect(), connect()
    a = stable_single(first, group)

    b_member, _ = park_newcomer(second, group)
    wait_for_state(observer, group, "PreparingRebalance")
    second.close()  # B's client goes away with its JoinGroup parked

    # The join phase still ends when A rejoins; B stays a member (as in Kafka) until it
    # is removed, and the undeliverable answer to B harms nobody.
    rejoined = first.request(join_request(group, a.member_id))
    assert (rejoined.error_code, rejoined.generation_id) == (NONE, 2)
    assert sorted(m.member_id for m in rejoined.members) == sorted([a.member_id, b_member])
    synced = first.request(sync_request(group, 2, a.member_id, {a.member_id: b"a", b_member: b"b"}))
    assert (synced.error_code, synced.assignment) == (NONE, b"a")
    assert first.request(heartbeat_request(group, 2, a.member_id)).error_code == NONE
    committed = first.request(commit_request(group, 2, a.member_id, topic, 7, ""))
    assert [p.error_code for t in committed.topics for p in t.partitions] == [NONE]

    # Removing the departed member rebalances the group down to A alone.
    left = first.request(leave_request(group, b_member))
    assert [(m.member_id, m.error_code) for m in left.members] == [(b_member, NONE)]
    assert first.request(heartbeat_request(group, 2, a.member_id)).error_code == (
        REBALANCE_IN_PROGRESS
    )
    alone = first.request(join_request(group, a.member_id))
    assert (alone.error_code, alone.generation_id) == (NONE, 3)
    assert [m.member_id for m in alone.members] == [a.member_id]
    synced = first.request(sync_request(group, 3, a.member_id, {a.member_id: b"all"}))
    assert (synced.error_code, synced.assignment) == (NONE, b"all")
    assert group_state(observer, group) == "Stable"

    # A fresh connection joins the same group as a new member as usual.
    third = connect()
    c_member, c_join = park_newcomer(third, group)
    wait_for_state(observer, group, "PreparingRebalance")
    again = first.request(join_request(group, a.member_id))
    c = receive_join(third, c_join)
    assert again.generation_id == c.generation_id == 4
    assert sorted(m.member_id for m in again.members) == sorted([a.member_id, c_member])
    left = first.request(leave_request(group, a.member_id, c_member))
    assert [m.error_code for m in left.members] == [NONE, NONE]
