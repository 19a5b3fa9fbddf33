"""Consumer-group APIs in process, across every version each handler serves.

JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit 2-9, OffsetFetch
1-9, DescribeGroups 0-6, ListGroups 0-5, DeleteGroups 0-2 and OffsetDelete 0 run on a real
`Broker` (group.initial.rebalance.delay.ms=0) with its `GroupCoordinatorService` timer task,
under trio with a `MockClock`: virtual time stands still, so no session or rebalance
timeout ever fires by accident, and the broker's clock (`virtual_clock_ms`) reads it.
Parked JoinGroup/SyncGroup calls run as tasks; `wait_all_tasks_blocked` says when they are
parked. Requests and responses both go through kio's wire codec and back.

Committed offsets must also survive in `__consumer_offsets`: a fresh
`GroupCoordinatorService` loaded from the same ReplicaManager sees the same offsets, and
sees tombstoned ones (DeleteGroups, OffsetDelete) gone.
"""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.consumer_protocol_subscription.v1 import ConsumerProtocolSubscription
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kafkalite.apis import (
    delete_groups,
    describe_groups,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.broker.delayed import ProduceResult
from kafkalite.broker.group_coordinator_service import (
    OFFSETS_TOPIC,
    GroupCoordinatorService,
    log_records,
)
from kafkalite.config import build_config
from kafkalite.coordinator import OffsetAndMetadata, TopicPartition, group_partition
from kafkalite.coordinator.consumer_protocol import subscribed_topics
from kafkalite.coordinator.records import GroupMetadataKey, OffsetCommitKey, decode_key
from kafkalite.protocol.entities import make

from .harness import request_module, roundtrip

OK = ErrorCode.none
BASE_MS = 1_700_000_000_000
SESSION_MS = 10_000
REBALANCE_MS = 30_000
CLIENT_HOST = "/127.0.0.1"
GROUP = "group-a"
TOPIC, OTHER_TOPIC, MISSING_TOPIC = "orders", "events", "no-such-topic"
META = b"member-metadata"
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
NO_OPERATIONS = -(2**31)
# A deadlocked test fails fast: after this long (real time) with every task blocked the
# clock jumps to the next deadline, and the watchdog (virtual time) comes first.
AUTOJUMP_REAL_S = 2.0
WATCHDOG_VIRTUAL_S = 1.0

JOIN_VERSIONS = range(0, 10)
SYNC_VERSIONS = range(0, 6)
HEARTBEAT_VERSIONS = range(0, 5)
LEAVE_VERSIONS = range(0, 6)
COMMIT_VERSIONS = range(2, 10)
FETCH_VERSIONS = range(1, 10)
DESCRIBE_VERSIONS = range(0, 7)
LIST_VERSIONS = range(0, 6)
DELETE_VERSIONS = range(0, 3)

# -- the broker under a virtual clock --------------------------------------------------------------


def virtual_clock_ms() -> int:
    """The broker's clock: trio's (mock) time inside a run, its start outside one."""
    try:
        return BASE_MS + int(trio.current_time() * 1000)
    except RuntimeError:
        return BASE_MS


GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "num.partitions": "1",
}


def open_group_broker(log_dir: Path, overrides: Mapping[str, str] | None = None) -> Broker:
    """A broker on the virtual clock, with GROUP_OVERRIDES plus `overrides`."""
    config = build_config({"log.dirs": str(log_dir), **GROUP_OVERRIDES, **(overrides or {})})
    return Broker.open(config, clock_ms=virtual_clock_ms)


@pytest.fixture
def open_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Open brokers with TOPIC (3 partitions) and OTHER_TOPIC (1); shut down after."""
    opened: list[Broker] = []

    def open_(overrides: Mapping[str, str] | None = None) -> Broker:
        broker = open_group_broker(tmp_path / f"broker-{len(opened)}", overrides)
        opened.append(broker)
        for name, partitions in ((TOPIC, 3), (OTHER_TOPIC, 1)):
            outcome, _ = broker.admin_manager.create_topic(name, partitions, 1)
            assert outcome.ok, outcome.message
        return broker

    yield open_
    for broker in opened:
        broker.shutdown()


@pytest.fixture
def broker(open_broker: Callable[..., Broker]) -> Broker:
    return open_broker()


def run(broker: Broker, body: Callable[[], Awaitable[None]]) -> None:
    """Run `body` under trio beside the broker's group timer task."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.groups.run)
            with trio.fail_after(WATCHDOG_VIRTUAL_S):
                await body()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=AUTOJUMP_REAL_S))


# -- calling handlers ------------------------------------------------------------------------------


def _request_roundtrip(request: Any) -> None:
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    decoded, size = entity_reader(type(request))(buffer.getvalue(), 0)
    assert (decoded, size) == (request, len(buffer.getvalue()))


async def call(
    broker: Broker,
    api: ApiHandler,
    version: int,
    build: Callable[[Any], Any],
    client_id: str = "tests",
) -> Any:
    """Run the handler (awaiting it if async) on `build(request module)`; wire-checked."""
    request = build(request_module(api.api_key, version))
    _request_roundtrip(request)
    ctx = RequestContext(broker, api.api_key, version, 11, client_id, CLIENT_HOST)
    response = api.handle(ctx, request)
    if api.is_async:
        response = await response
    assert type(response).__version__ == version
    assert roundtrip(response) == response
    return response


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


Protocols = Sequence[tuple[str, bytes]]


async def join(
    broker: Broker,
    version: int,
    member_id: str = "",
    *,
    group: str = GROUP,
    protocols: Protocols = (("range", META),),
    protocol_type: str = "consumer",
    instance_id: str | None = None,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    client_id: str = "tests",
) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.JoinGroupRequest,
            group_id=group,
            session_timeout=ms(session_ms),
            rebalance_timeout=ms(rebalance_ms),
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=tuple(
                make(m.JoinGroupRequestProtocol, name=name, metadata=metadata)
                for name, metadata in protocols
            ),
            reason="testing" if version >= 8 else None,
        )

    return await call(broker, join_group.API, version, build, client_id)


async def join_new(broker: Broker, version: int, **fields: Any) -> Any:
    """A new member joins: from v4 a dynamic member gets MEMBER_ID_REQUIRED and rejoins."""
    first = await join(broker, version, **fields)
    if version < 4 or fields.get("instance_id") is not None:
        return first
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id.startswith(f"{fields.get('client_id', 'tests')}-")
    assert (first.generation_id, first.leader, first.members) == (-1, "", ())
    return await join(broker, version, first.member_id, **fields)


async def sync(
    broker: Broker,
    version: int,
    generation: int,
    member_id: str,
    assignments: Mapping[str, bytes] | None = None,
    *,
    group: str = GROUP,
    instance_id: str | None = None,
    protocol: tuple[str | None, str | None] = ("consumer", "range"),
) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.SyncGroupRequest,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol[0],
            protocol_name=protocol[1],
            assignments=tuple(
                make(m.SyncGroupRequestAssignment, member_id=member, assignment=data)
                for member, data in (assignments or {}).items()
            ),
        )

    return await call(broker, sync_group.API, version, build)


async def beat(
    broker: Broker,
    version: int,
    generation: int,
    member_id: str,
    *,
    group: str = GROUP,
    instance_id: str | None = None,
) -> ErrorCode:
    def build(m: Any) -> Any:
        return make(
            m.HeartbeatRequest,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )

    response = await call(broker, heartbeat.API, version, build)
    return response.error_code


async def leave(
    broker: Broker,
    version: int,
    *members: tuple[str, str | None],
    group: str = GROUP,
) -> Any:
    def build(m: Any) -> Any:
        if version < 3:
            ((member_id, _),) = members
            return make(m.LeaveGroupRequest, group_id=group, member_id=member_id)
        return make(
            m.LeaveGroupRequest,
            group_id=group,
            members=tuple(
                make(
                    m.MemberIdentity,
                    member_id=member_id,
                    group_instance_id=instance_id,
                    reason="bye" if version >= 5 else None,
                )
                for member_id, instance_id in members
            ),
        )

    return await call(broker, leave_group.API, version, build)


# (topic, partition, offset, leader epoch, metadata)
Commit = tuple[str, int, int, int, str | None]


async def commit(
    broker: Broker,
    version: int,
    *commits: Commit,
    group: str = GROUP,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    retention_ms: int = -1,
) -> list[tuple[str, int, ErrorCode]]:
    """OffsetCommit; returns (topic, partition, error) in response order."""
    by_topic: dict[str, list[Commit]] = {}
    for entry in commits:
        by_topic.setdefault(entry[0], []).append(entry)

    def build(m: Any) -> Any:
        topics = tuple(
            make(
                m.OffsetCommitRequestTopic,
                name=topic,
                partitions=tuple(
                    make(
                        m.OffsetCommitRequestPartition,
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=epoch,
                        committed_metadata=metadata,
                    )
                    for _, partition, offset, epoch, metadata in entries
                ),
            )
            for topic, entries in by_topic.items()
        )
        return make(
            m.OffsetCommitRequest,
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time=ms(retention_ms),
            topics=topics,
        )

    response = await call(broker, offset_commit.API, version, build)
    return [
        (t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions
    ]


# What OffsetFetch says about one partition: (offset, leader epoch or None, metadata, error).
Fetched = dict[tuple[str, int], tuple[int, int | None, str | None, ErrorCode]]
Wanted = Mapping[str, Sequence[int]] | None


def _fetched(topics: Any) -> Fetched:
    return {
        (t.name, p.partition_index): (
            p.committed_offset,
            getattr(p, "committed_leader_epoch", None),
            p.metadata,
            p.error_code,
        )
        for t in topics
        for p in t.partitions
    }


async def fetch(
    broker: Broker, version: int, wanted: Wanted, group: str = GROUP
) -> tuple[ErrorCode | None, Fetched]:
    """OffsetFetch v1-7 for one group: (top-level error, None for v1; partitions)."""
    assert version < 8

    def build(m: Any) -> Any:
        topics = (
            None
            if wanted is None
            else tuple(
                make(m.OffsetFetchRequestTopic, name=name, partition_indexes=tuple(parts))
                for name, parts in wanted.items()
            )
        )
        return make(m.OffsetFetchRequest, group_id=group, topics=topics, require_stable=False)

    response = await call(broker, offset_fetch.API, version, build)
    return getattr(response, "error_code", None), _fetched(response.topics)


async def fetch_groups(
    broker: Broker, version: int, groups: Mapping[str, Wanted]
) -> list[tuple[str, ErrorCode, Fetched]]:
    """OffsetFetch v8-9, several groups at once: (group, error, partitions) in order."""
    assert version >= 8

    def build(m: Any) -> Any:
        return make(
            m.OffsetFetchRequest,
            groups=tuple(
                make(
                    m.OffsetFetchRequestGroup,
                    group_id=group,
                    member_id=None,
                    member_epoch=-1,
                    topics=None
                    if wanted is None
                    else tuple(
                        make(m.OffsetFetchRequestTopics, name=name, partition_indexes=tuple(parts))
                        for name, parts in wanted.items()
                    ),
                )
                for group, wanted in groups.items()
            ),
            require_stable=False,
        )

    response = await call(broker, offset_fetch.API, version, build)
    return [(g.group_id, g.error_code, _fetched(g.topics)) for g in response.groups]


async def fetch_any(broker: Broker, version: int, wanted: Wanted, group: str = GROUP) -> Fetched:
    """A group's offsets through whichever OffsetFetch layout `version` has; no errors."""
    if version >= 8:
        ((got_group, error, fetched),) = await fetch_groups(broker, version, {group: wanted})
        assert got_group == group
    else:
        error, fetched = await fetch(broker, version, wanted, group)
    assert error in (None, OK)
    return fetched


async def describe(
    broker: Broker, version: int, *groups: str, include_operations: bool = True
) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.DescribeGroupsRequest,
            groups=groups,
            include_authorized_operations=include_operations,
        )

    return await call(broker, describe_groups.API, version, build)


async def list_all(
    broker: Broker, version: int, states: Sequence[str] = (), types: Sequence[str] = ()
) -> Any:
    def build(m: Any) -> Any:
        return make(m.ListGroupsRequest, states_filter=tuple(states), types_filter=tuple(types))

    return await call(broker, list_groups.API, version, build)


async def delete(broker: Broker, version: int, *groups: str) -> dict[str, ErrorCode]:
    def build(m: Any) -> Any:
        return make(m.DeleteGroupsRequest, groups_names=groups)

    response = await call(broker, delete_groups.API, version, build)
    assert [r.group_id for r in response.results] == list(groups)
    return {r.group_id: r.error_code for r in response.results}


async def delete_offsets(
    broker: Broker, wanted: Mapping[str, Sequence[int]], group: str = GROUP
) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
    def build(m: Any) -> Any:
        return make(
            m.OffsetDeleteRequest,
            group_id=group,
            topics=tuple(
                make(
                    m.OffsetDeleteRequestTopic,
                    name=name,
                    partitions=tuple(
                        make(m.OffsetDeleteRequestPartition, partition_index=p) for p in parts
                    ),
                )
                for name, parts in wanted.items()
            ),
        )

    response = await call(broker, offset_delete.API, 0, build)
    errors = {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }
    return response.error_code, errors


# -- groups in a known state -----------------------------------------------------------------------


def state_of(broker: Broker, group: str = GROUP) -> str | None:
    found = broker.groups.coordinator.group(group)
    return None if found is None else str(found.state)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v1, as a Java consumer puts in its JoinGroup."""
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolSubscription)(
        buffer, ConsumerProtocolSubscription(topics=topics, user_data=None, owned_partitions=())
    )
    return buffer.getvalue()


async def stable_single(broker: Broker, version: int = 9, **fields: Any) -> Any:
    """One member joins a new group and syncs: Stable at generation 1. Its join response."""
    joined = await join_new(broker, version, **fields)
    assert joined.error_code == OK
    synced = await sync(
        broker,
        5,
        joined.generation_id,
        joined.member_id,
        {joined.member_id: b"solo"},
        group=fields.get("group", GROUP),
        instance_id=fields.get("instance_id"),
        protocol=(fields.get("protocol_type", "consumer"), joined.protocol_name),
    )
    assert synced.error_code == OK
    return joined


async def second_member_joins(
    broker: Broker, first: Any, version: int = 9, **fields: Any
) -> tuple[Any, Any]:
    """A second member joins a Stable group, parks, and is let in by the first's rejoin.

    Returns both join responses for the new generation (the group is CompletingRebalance).
    """
    group = fields.get("group", GROUP)
    joined: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:

        async def newcomer() -> None:
            joined["b"] = await join_new(broker, version, **fields)

        nursery.start_soon(newcomer)
        await trio.testing.wait_all_tasks_blocked()
        assert "b" not in joined, "the newcomer's JoinGroup must wait for the first member"
        assert state_of(broker, group) == "PreparingRebalance"
        joined["a"] = await join(
            broker, version, first.member_id, **{**fields, "client_id": "tests"}
        )
    return joined["a"], joined["b"]


async def stable_pair(
    broker: Broker, *, group: str = GROUP, protocols: Protocols = (("range", META),)
) -> tuple[Any, Any]:
    """A Stable two-member group (generation 2): member A ("client-a") leads, B follows.

    A is assigned b"assignment-a", B b"assignment-b".
    """
    first = await stable_single(broker, group=group, protocols=protocols, client_id="client-a")
    a, b = await second_member_joins(
        broker, first, group=group, protocols=protocols, client_id="client-b"
    )
    assignments = {a.member_id: b"assignment-a", b.member_id: b"assignment-b"}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(sync, broker, 5, b.generation_id, b.member_id, group=group))
        await trio.testing.wait_all_tasks_blocked()
        await sync(broker, 5, a.generation_id, a.member_id, assignments, group=group)
    assert state_of(broker, group) == "Stable"
    return a, b


def offsets_partition(broker: Broker, group: str) -> Any:
    """The group's partition of `__consumer_offsets` (None before the topic exists)."""
    topic = broker.replica_manager.topics.get(OFFSETS_TOPIC)
    if topic is None:
        return None
    return topic.partitions[group_partition(group, len(topic.partitions))]


def offsets_log_end(broker: Broker, group: str) -> int:
    partition = offsets_partition(broker, group)
    return 0 if partition is None else partition.log.log_end_offset


def offset_records(broker: Broker, group: str, since: int = 0) -> list[tuple[Any, bool]]:
    """The group's OffsetCommit records (key, is a tombstone) from log offset `since`."""
    partition = offsets_partition(broker, group)
    if partition is None:
        return []
    keys = [
        (decode_key(record.key), record.value is None)
        for record in log_records(partition.log)
        if record.offset >= since
    ]
    return [
        (key, tombstone)
        for key, tombstone in keys
        if isinstance(key, OffsetCommitKey) and key.group_id == group
    ]


def group_records(broker: Broker, group: str, since: int = 0) -> list[bool]:
    """Whether each of the group's GroupMetadata records from `since` is a tombstone."""
    partition = offsets_partition(broker, group)
    if partition is None:
        return []
    return [
        record.value is None
        for record in log_records(partition.log)
        if record.offset >= since and decode_key(record.key) == GroupMetadataKey(group)
    ]


def reloaded(broker: Broker) -> GroupCoordinatorService:
    """A fresh coordinator service replaying the broker's `__consumer_offsets`."""
    service = GroupCoordinatorService(broker.config, broker.replica_manager)
    service.load()
    return service


# -- JoinGroup -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", JOIN_VERSIONS)
def test_join_group_first_member_completes_the_join(broker: Broker, version: int) -> None:
    async def body() -> None:
        first = await join(broker, version)
        if version >= 4:  # KIP-394: MEMBER_ID_REQUIRED round trip
            assert first.error_code == ErrorCode.member_id_required
            assert first.member_id.startswith("tests-")
            assert (first.generation_id, first.leader, first.members) == (-1, "", ())
            assert broker.groups.coordinator.group(GROUP).is_pending_member(first.member_id)
            joined = await join(broker, version, first.member_id)
            assert joined.member_id == first.member_id
        else:
            joined = first
            assert joined.member_id.startswith("tests-")
        assert joined.error_code == OK
        assert (joined.generation_id, joined.leader) == (1, joined.member_id)
        assert joined.protocol_name == "range"
        assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, META)]
        if version >= 5:
            assert joined.members[0].group_instance_id is None
        if version >= 7:
            assert joined.protocol_type == "consumer"
        if version >= 9:
            assert joined.skip_assignment is False
        assert state_of(broker) == "CompletingRebalance"
        member = broker.groups.coordinator.group(GROUP).members[joined.member_id]
        # v0 has no rebalance timeout: the session timeout stands in for it.
        assert member.rebalance_timeout_ms == (SESSION_MS if version == 0 else REBALANCE_MS)
        assert member.session_timeout_ms == SESSION_MS
        assert (member.client_id, member.client_host) == ("tests", CLIENT_HOST)

    run(broker, body)


@pytest.mark.parametrize("version", JOIN_VERSIONS)
def test_join_group_follower_gets_no_member_list(broker: Broker, version: int) -> None:
    async def body() -> None:
        first = await stable_single(broker, version)
        a, b = await second_member_joins(broker, first, version, client_id="other")
        assert a.error_code == b.error_code == OK
        assert a.generation_id == b.generation_id == 2
        assert a.leader == b.leader == a.member_id
        assert b.member_id.startswith("other-")
        assert sorted(m.member_id for m in a.members) == sorted([a.member_id, b.member_id])
        assert b.members == ()

    run(broker, body)


@pytest.mark.parametrize("version", JOIN_VERSIONS)
def test_join_group_errors(broker: Broker, version: int) -> None:
    async def body() -> None:
        response = await join(broker, version, group="")
        assert response.error_code == ErrorCode.invalid_group_id
        response = await join(broker, version, session_ms=1_000)  # under group.min.session
        assert response.error_code == ErrorCode.invalid_session_timeout
        # A member id for a group that does not exist is stale.
        response = await join(broker, version, "tests-gone")
        assert (response.error_code, response.member_id) == (
            ErrorCode.unknown_member_id,
            "tests-gone",
        )
        await stable_single(broker, version)
        response = await join(broker, version, protocol_type="connect")
        assert response.error_code == ErrorCode.inconsistent_group_protocol
        response = await join(broker, version, protocols=(("roundrobin", META),))
        assert response.error_code == ErrorCode.inconsistent_group_protocol

    run(broker, body)


@pytest.mark.parametrize("version", range(5, 10))
def test_join_group_static_member_and_restart(broker: Broker, version: int) -> None:
    """v5+ (KIP-345): a static member joins without MEMBER_ID_REQUIRED; rejoining with no
    member id replaces it at once in a Stable group and fences the old id."""

    async def body() -> None:
        joined = await stable_single(broker, version, instance_id="instance-1")
        old_id = joined.member_id
        assert old_id.startswith("instance-1-")
        assert [(m.member_id, m.group_instance_id) for m in joined.members] == [
            (old_id, "instance-1")
        ]

        restarted = await join(broker, version, instance_id="instance-1")
        new_id = restarted.member_id
        assert restarted.error_code == OK
        assert new_id.startswith("instance-1-") and new_id != old_id
        assert restarted.generation_id == 1  # no rebalance
        if version >= 9:  # KIP-814: the leader learns it leads but must skip the assignor
            assert restarted.skip_assignment is True
            assert restarted.leader == new_id
            assert [(m.member_id, m.group_instance_id, m.metadata) for m in restarted.members] == [
                (new_id, "instance-1", META)
            ]
        else:  # the old leader id, so the restarted leader does not reassign
            assert (restarted.leader, restarted.members) == (old_id, ())
        assert state_of(broker) == "Stable"
        assert await beat(broker, 4, 1, new_id, instance_id="instance-1") == OK
        assert await beat(broker, 4, 1, old_id, instance_id="instance-1") == (
            ErrorCode.fenced_instance_id
        )

    run(broker, body)


# -- SyncGroup -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", SYNC_VERSIONS)
def test_sync_group_delivers_the_leaders_assignment(broker: Broker, version: int) -> None:
    async def body() -> None:
        first = await stable_single(broker)
        a, b = await second_member_joins(broker, first)
        synced: dict[str, Any] = {}
        async with trio.open_nursery() as nursery:

            async def follower() -> None:
                synced["b"] = await sync(broker, version, b.generation_id, b.member_id)

            nursery.start_soon(follower)
            await trio.testing.wait_all_tasks_blocked()
            assert "b" not in synced, "a follower waits for the leader's assignment"
            assert state_of(broker) == "CompletingRebalance"
            assignments = {a.member_id: b"for-a", b.member_id: b"for-b"}
            synced["a"] = await sync(broker, version, a.generation_id, a.member_id, assignments)
        assert state_of(broker) == "Stable"
        for name, expected in (("a", b"for-a"), ("b", b"for-b")):
            response = synced[name]
            assert (response.error_code, response.assignment) == (OK, expected)
            if version >= 5:
                assert (response.protocol_type, response.protocol_name) == ("consumer", "range")
        # A Stable group resends a member its assignment.
        again = await sync(broker, version, b.generation_id, b.member_id)
        assert (again.error_code, again.assignment) == (OK, b"for-b")

    run(broker, body)


@pytest.mark.parametrize("version", SYNC_VERSIONS)
def test_sync_group_errors(broker: Broker, version: int) -> None:
    async def body() -> None:
        response = await sync(broker, version, 1, "tests-nobody")
        assert response.error_code == ErrorCode.unknown_member_id  # no such group
        joined = await join_new(broker, 9)
        member = joined.member_id
        response = await sync(broker, version, 1, "tests-nobody")
        assert response.error_code == ErrorCode.unknown_member_id
        response = await sync(broker, version, 2, member)
        assert response.error_code == ErrorCode.illegal_generation
        response = await sync(broker, version, 1, member, group="")
        assert response.error_code == ErrorCode.invalid_group_id
        assert state_of(broker) == "CompletingRebalance"
        response = await sync(broker, version, 1, member, {member: b"x"})
        assert (response.error_code, response.assignment) == (OK, b"x")

    run(broker, body)


@pytest.mark.parametrize(
    "protocol",
    [("consumer", "roundrobin"), ("connect", "range"), (None, "range"), ("consumer", None)],
)
def test_sync_group_v5_inconsistent_protocol(
    broker: Broker, protocol: tuple[str | None, str | None]
) -> None:
    """v5 must echo the join's protocol type and name (KafkaApis refuses a v5 SyncGroup
    without them; the coordinator one that names another protocol)."""

    async def body() -> None:
        joined = await join_new(broker, 9, protocols=(("range", META), ("roundrobin", META)))
        assert joined.protocol_name == "range"
        member = joined.member_id
        response = await sync(broker, 5, 1, member, {member: b"x"}, protocol=protocol)
        assert response.error_code == ErrorCode.inconsistent_group_protocol
        assert (response.protocol_type, response.protocol_name) == (None, None)
        assert state_of(broker) == "CompletingRebalance"
        response = await sync(broker, 5, 1, member, {member: b"x"})
        assert (response.error_code, response.assignment) == (OK, b"x")

    run(broker, body)


# -- Heartbeat -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", HEARTBEAT_VERSIONS)
def test_heartbeat_errors_and_rebalance_in_progress(broker: Broker, version: int) -> None:
    async def body() -> None:
        assert await beat(broker, version, 1, "tests-nobody") == ErrorCode.unknown_member_id
        first = await stable_single(broker)
        member, generation = first.member_id, first.generation_id
        assert await beat(broker, version, generation, member) == OK
        assert await beat(broker, version, generation, "tests-nobody") == (
            ErrorCode.unknown_member_id
        )
        assert await beat(broker, version, generation + 1, member) == ErrorCode.illegal_generation
        assert await beat(broker, version, generation, member, group="") == (
            ErrorCode.invalid_group_id
        )
        if version >= 3:  # an instance id the group does not know
            assert await beat(broker, version, generation, member, instance_id="x") == (
                ErrorCode.unknown_member_id
            )
        joined: dict[str, Any] = {}
        async with trio.open_nursery() as nursery:

            async def newcomer() -> None:
                joined["b"] = await join_new(broker, 9, client_id="other")

            nursery.start_soon(newcomer)
            await trio.testing.wait_all_tasks_blocked()
            # The first member learns from its heartbeat that it must rejoin.
            assert await beat(broker, version, generation, member) == (
                ErrorCode.rebalance_in_progress
            )
            rejoined = await join(broker, 9, member)
        assert rejoined.generation_id == joined["b"].generation_id == generation + 1
        assert await beat(broker, version, generation, member) == ErrorCode.illegal_generation
        assert await beat(broker, version, generation + 1, member) == OK  # CompletingRebalance

    run(broker, body)


def test_heartbeat_static_member_with_instance_id(broker: Broker) -> None:
    async def body() -> None:
        joined = await stable_single(broker, 9, instance_id="instance-1")
        member = joined.member_id
        assert await beat(broker, 3, 1, member, instance_id="instance-1") == OK
        assert await beat(broker, 3, 1, "tests-other", instance_id="instance-1") == (
            ErrorCode.fenced_instance_id
        )

    run(broker, body)


# -- LeaveGroup ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 3))
def test_leave_group_single_member(broker: Broker, version: int) -> None:
    async def body() -> None:
        response = await leave(broker, version, ("tests-nobody", None))
        assert response.error_code == ErrorCode.unknown_member_id  # no such group
        first = await stable_single(broker)
        response = await leave(broker, version, ("tests-nobody", None))
        assert response.error_code == ErrorCode.unknown_member_id
        response = await leave(broker, version, (first.member_id, None))
        assert response.error_code == OK
        assert state_of(broker) == "Empty"
        response = await leave(broker, version, (first.member_id, None))
        assert response.error_code == ErrorCode.unknown_member_id
        response = await leave(broker, version, (first.member_id, None), group="")
        assert response.error_code == ErrorCode.invalid_group_id

    run(broker, body)


@pytest.mark.parametrize("version", range(3, 6))
def test_leave_group_batch_with_per_member_errors(broker: Broker, version: int) -> None:
    async def body() -> None:
        a, b = await stable_pair(broker)
        response = await leave(
            broker, version, (a.member_id, None), ("tests-ghost", None), (b.member_id, None)
        )
        assert response.error_code == OK
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
            (a.member_id, None, OK),
            ("tests-ghost", None, ErrorCode.unknown_member_id),
            (b.member_id, None, OK),
        ]
        assert state_of(broker) == "Empty"

    run(broker, body)


@pytest.mark.parametrize("version", range(3, 6))
def test_leave_group_static_member_by_instance_id(broker: Broker, version: int) -> None:
    """Administrative removal (member id "" plus group.instance.id), as kafka-consumer-groups
    --delete-members does; an unknown instance id is UNKNOWN_MEMBER_ID for that entry."""

    async def body() -> None:
        await stable_single(broker, 9, instance_id="instance-1")
        response = await leave(broker, version, ("", "instance-1"), ("", "instance-9"))
        assert response.error_code == OK
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
            ("", "instance-1", OK),
            ("", "instance-9", ErrorCode.unknown_member_id),
        ]
        assert state_of(broker) == "Empty"

    run(broker, body)


@pytest.mark.parametrize("version", range(3, 6))
def test_leave_group_unknown_group_answers_per_member(broker: Broker, version: int) -> None:
    """Kafka 4 (GroupCoordinatorService.leaveGroup): a group that does not exist gives every
    member UNKNOWN_MEMBER_ID, with no top-level error."""

    async def body() -> None:
        response = await leave(broker, version, ("m-1", None), ("m-2", "instance-2"))
        assert response.error_code == OK
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
            ("m-1", None, ErrorCode.unknown_member_id),
            ("m-2", "instance-2", ErrorCode.unknown_member_id),
        ]

    run(broker, body)


# -- OffsetCommit ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", COMMIT_VERSIONS)
def test_offset_commit_simple_consumer_and_unknown_partitions(broker: Broker, version: int) -> None:
    """Generation -1 and no member id: a simple group is created; partitions the broker does
    not have fail alone while the others in the same request are committed."""

    async def body() -> None:
        results = await commit(
            broker,
            version,
            (TOPIC, 0, 10, 3, "m0"),
            (TOPIC, 7, 11, -1, None),  # TOPIC has 3 partitions
            (MISSING_TOPIC, 0, 12, -1, None),
            (TOPIC, 1, 20, -1, None),
        )
        assert results == [
            (TOPIC, 0, OK),
            (TOPIC, 7, ErrorCode.unknown_topic_or_partition),
            (TOPIC, 1, OK),
            (MISSING_TOPIC, 0, ErrorCode.unknown_topic_or_partition),
        ]
        assert state_of(broker) == "Empty"
        coordinator = broker.groups.coordinator
        epoch = 3 if version >= 6 else -1  # v6+ carry the leader epoch
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 0)) == OffsetAndMetadata(
            10, epoch, "m0", BASE_MS
        )
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 1)) == OffsetAndMetadata(
            20, -1, "", BASE_MS
        )
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 7)) is None
        assert coordinator.committed(GROUP, TopicPartition(MISSING_TOPIC, 0)) is None

    run(broker, body)


@pytest.mark.parametrize("version", range(2, 5))
def test_offset_commit_retention_time_v2_to_v4(broker: Broker, version: int) -> None:
    async def body() -> None:
        assert await commit(broker, version, (TOPIC, 0, 5, -1, ""), retention_ms=60_000) == [
            (TOPIC, 0, OK)
        ]
        committed = broker.groups.coordinator.committed(GROUP, TopicPartition(TOPIC, 0))
        assert committed == OffsetAndMetadata(5, -1, "", BASE_MS, BASE_MS + 60_000)
        assert reloaded(broker).coordinator.committed(GROUP, TopicPartition(TOPIC, 0)) == committed

    run(broker, body)


@pytest.mark.parametrize("version", COMMIT_VERSIONS)
def test_offset_commit_by_group_members(broker: Broker, version: int) -> None:
    async def body() -> None:
        # A group that does not exist: v9 says so, older versions get ILLEGAL_GENERATION.
        gone = ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
        assert await commit(broker, version, (TOPIC, 0, 1, -1, ""), generation=1) == [
            (TOPIC, 0, gone)
        ]
        first = await stable_single(broker)
        member, generation = first.member_id, first.generation_id
        entries = ((TOPIC, 0, 100, -1, "a"), (TOPIC, 1, 200, -1, "b"))
        wrong_generation = await commit(
            broker, version, *entries, generation=generation + 1, member_id=member
        )
        assert wrong_generation == [
            (TOPIC, 0, ErrorCode.illegal_generation),
            (TOPIC, 1, ErrorCode.illegal_generation),
        ]
        unknown = await commit(
            broker, version, *entries, generation=generation, member_id="tests-nobody"
        )
        assert {error for _, _, error in unknown} == {ErrorCode.unknown_member_id}
        # Anonymous commits would overwrite offsets the members manage.
        anonymous = await commit(broker, version, *entries)
        assert {error for _, _, error in anonymous} == {ErrorCode.unknown_member_id}
        assert broker.groups.coordinator.committed(GROUP, TopicPartition(TOPIC, 0)) is None

        ok = await commit(broker, version, *entries, generation=generation, member_id=member)
        assert ok == [(TOPIC, 0, OK), (TOPIC, 1, OK)]
        committed = broker.groups.coordinator.committed(GROUP, TopicPartition(TOPIC, 1))
        assert (committed.offset, committed.metadata) == (200, "b")

    run(broker, body)


@pytest.mark.parametrize("version", COMMIT_VERSIONS)
def test_offset_commit_during_completing_rebalance(broker: Broker, version: int) -> None:
    async def body() -> None:
        joined = await join_new(broker, 9)
        assert state_of(broker) == "CompletingRebalance"
        results = await commit(
            broker, version, (TOPIC, 0, 1, -1, ""), generation=1, member_id=joined.member_id
        )
        assert results == [(TOPIC, 0, ErrorCode.rebalance_in_progress)]

    run(broker, body)


@pytest.mark.parametrize("version", COMMIT_VERSIONS)
def test_offset_commit_metadata_too_large(open_broker: Callable[..., Broker], version: int) -> None:
    broker = open_broker({"offset.metadata.max.bytes": "8"})

    async def body() -> None:
        results = await commit(
            broker, version, (TOPIC, 0, 1, -1, "x" * 9), (TOPIC, 1, 2, -1, "y" * 8)
        )
        assert results == [(TOPIC, 0, ErrorCode.offset_metadata_too_large), (TOPIC, 1, OK)]
        coordinator = broker.groups.coordinator
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 0)) is None
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 1)).metadata == "y" * 8

    run(broker, body)


@pytest.mark.parametrize("version", COMMIT_VERSIONS)
def test_offset_commit_and_fetch_for_the_empty_group_id(broker: Broker, version: int) -> None:
    """Kafka accepts OffsetCommit and OffsetFetch for the group id "" "for backwards
    compatibility" (GroupCoordinatorService: only a null group id is INVALID_GROUP_ID)."""

    async def body() -> None:
        assert await commit(broker, version, (TOPIC, 0, 33, -1, "e"), group="") == [(TOPIC, 0, OK)]
        fetched = await fetch_any(broker, version, {TOPIC: [0]}, group="")
        assert fetched[(TOPIC, 0)][0] == 33

    run(broker, body)


# -- OffsetFetch -----------------------------------------------------------------------------------


async def commit_sample(broker: Broker, group: str = GROUP) -> None:
    results = await commit(
        broker,
        9,
        (TOPIC, 0, 10, 4, "m0"),
        (TOPIC, 1, 20, -1, None),
        (OTHER_TOPIC, 0, 5, 2, "e0"),
        group=group,
    )
    assert {error for _, _, error in results} == {OK}


@pytest.mark.parametrize("version", range(1, 8))
def test_offset_fetch_single_group(broker: Broker, version: int) -> None:
    async def body() -> None:
        await commit_sample(broker)
        error, fetched = await fetch(broker, version, {TOPIC: [0, 1, 2]})
        assert error == (None if version < 2 else OK)

        def epoch(value: int) -> int | None:  # v5+ report the leader epoch
            return value if version >= 5 else None

        assert fetched == {
            (TOPIC, 0): (10, epoch(4), "m0", OK),
            (TOPIC, 1): (20, epoch(-1), "", OK),
            (TOPIC, 2): (-1, epoch(-1), "", OK),  # never committed
        }
        if version >= 2:  # topics null: every committed offset
            error, everything = await fetch(broker, version, None)
            assert error == OK
            assert everything == {
                (TOPIC, 0): (10, epoch(4), "m0", OK),
                (TOPIC, 1): (20, epoch(-1), "", OK),
                (OTHER_TOPIC, 0): (5, epoch(2), "e0", OK),
            }
        # A group nobody knows is no error: its partitions have no offset.
        error, unknown = await fetch(broker, version, {TOPIC: [0]}, group="nobody")
        assert error == (None if version < 2 else OK)
        assert unknown == {(TOPIC, 0): (-1, epoch(-1), "", OK)}
        if version >= 2:
            assert await fetch(broker, version, None, group="nobody") == (OK, {})

    run(broker, body)


@pytest.mark.parametrize("version", range(8, 10))
def test_offset_fetch_batched_groups(broker: Broker, version: int) -> None:
    async def body() -> None:
        await commit_sample(broker, "group-1")
        assert await commit(broker, 9, (TOPIC, 2, 77, 1, "g2"), group="group-2") == [(TOPIC, 2, OK)]
        results = await fetch_groups(
            broker,
            version,
            {"group-1": {TOPIC: [0, 2]}, "group-2": None, "nobody": {OTHER_TOPIC: [0]}},
        )
        assert results == [
            ("group-1", OK, {(TOPIC, 0): (10, 4, "m0", OK), (TOPIC, 2): (-1, -1, "", OK)}),
            ("group-2", OK, {(TOPIC, 2): (77, 1, "g2", OK)}),
            ("nobody", OK, {(OTHER_TOPIC, 0): (-1, -1, "", OK)}),
        ]

    run(broker, body)


# -- DescribeGroups --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", DESCRIBE_VERSIONS)
def test_describe_groups(broker: Broker, version: int) -> None:
    async def body() -> None:
        a, b = await stable_pair(broker)
        await commit_sample(broker, "simple")
        response = await describe(broker, version, GROUP, "simple", "ghost")
        stable, simple, ghost = response.groups

        assert (stable.error_code, stable.group_id, stable.group_state) == (OK, GROUP, "Stable")
        assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
        members = {
            m.member_id: (m.client_id, m.client_host, m.member_metadata, m.member_assignment)
            for m in stable.members
        }
        assert members == {
            a.member_id: ("client-a", CLIENT_HOST, META, b"assignment-a"),
            b.member_id: ("client-b", CLIENT_HOST, META, b"assignment-b"),
        }
        if version >= 4:
            assert {m.group_instance_id for m in stable.members} == {None}

        assert (simple.error_code, simple.group_state, simple.members) == (OK, "Empty", ())
        assert (simple.protocol_type, simple.protocol_data) == ("", "")

        assert (ghost.group_id, ghost.group_state, ghost.members) == ("ghost", "Dead", ())
        if version >= 6:  # KIP-1043
            assert ghost.error_code == ErrorCode.group_id_not_found
            assert ghost.error_message == "Group ghost not found."
        else:
            assert ghost.error_code == OK

        if version >= 3:
            assert (
                stable.authorized_operations == simple.authorized_operations == (GROUP_OPERATIONS)
            )
            # Kafka sets the operations only on groups described without an error.
            assert ghost.authorized_operations == (
                NO_OPERATIONS if version >= 6 else GROUP_OPERATIONS
            )
            plain = await describe(broker, version, GROUP, include_operations=False)
            assert plain.groups[0].authorized_operations == NO_OPERATIONS

    run(broker, body)


@pytest.mark.parametrize("version", DESCRIBE_VERSIONS)
def test_describe_group_rebalancing_has_no_protocol_or_metadata(
    broker: Broker, version: int
) -> None:
    async def body() -> None:
        joined = await join_new(broker, 9)
        (group,) = (await describe(broker, version, GROUP)).groups
        assert (group.group_state, group.protocol_type, group.protocol_data) == (
            "CompletingRebalance",
            "consumer",
            "",
        )
        assert [(m.member_id, m.member_metadata) for m in group.members] == [
            (joined.member_id, b"")
        ]

    run(broker, body)


# -- ListGroups ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", LIST_VERSIONS)
def test_list_groups(broker: Broker, version: int) -> None:
    async def body() -> None:
        await stable_single(broker)
        await commit_sample(broker, "simple")
        response = await list_all(broker, version)
        assert response.error_code == OK
        listed = {g.group_id: g for g in response.groups}
        assert set(listed) == {GROUP, "simple"}
        assert (listed[GROUP].protocol_type, listed["simple"].protocol_type) == ("consumer", "")
        if version >= 4:
            assert (listed[GROUP].group_state, listed["simple"].group_state) == (
                "Stable",
                "Empty",
            )
            stable = await list_all(broker, version, states=["Stable"])
            assert [g.group_id for g in stable.groups] == [GROUP]
            empty = await list_all(broker, version, states=["empty"])  # case-insensitive
            assert [g.group_id for g in empty.groups] == ["simple"]
            both = await list_all(broker, version, states=["Empty", "Stable"])
            assert {g.group_id for g in both.groups} == {GROUP, "simple"}
            assert (await list_all(broker, version, states=["Dead"])).groups == ()
        if version >= 5:
            assert {g.group_type for g in response.groups} == {"classic"}
            classic = await list_all(broker, version, types=["classic"])
            assert {g.group_id for g in classic.groups} == {GROUP, "simple"}
            assert (await list_all(broker, version, types=["consumer"])).groups == ()

    run(broker, body)


# -- DeleteGroups ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", DELETE_VERSIONS)
def test_delete_groups(broker: Broker, version: int) -> None:
    async def body() -> None:
        await stable_single(broker)
        await commit_sample(broker, "simple")
        assert await delete(broker, version, GROUP, "simple", "ghost") == {
            GROUP: ErrorCode.non_empty_group,
            "simple": OK,
            "ghost": ErrorCode.group_id_not_found,
        }
        assert state_of(broker, "simple") is None
        assert state_of(broker) == "Stable"
        # "ghost" is looked for among share groups too, without creating __share_group_state.
        assert "__share_group_state" not in broker.metadata.topics
        assert await fetch_any(broker, 9, None, group="simple") == {}
        assert await fetch_any(broker, 5, {TOPIC: [0]}, group="simple") == {
            (TOPIC, 0): (-1, -1, "", OK)
        }
        assert {g.group_id for g in (await list_all(broker, 5)).groups} == {GROUP}
        # Deleting again: gone.
        assert await delete(broker, version, "simple") == {"simple": ErrorCode.group_id_not_found}

    run(broker, body)


@pytest.mark.parametrize("version", DELETE_VERSIONS)
def test_delete_groups_empty_group_id(broker: Broker, version: int) -> None:
    """Kafka supports DeleteGroups for the group id "" (only null is INVALID_GROUP_ID)."""

    async def body() -> None:
        assert await delete(broker, version, "") == {"": ErrorCode.group_id_not_found}
        assert await commit(broker, 9, (TOPIC, 0, 1, -1, ""), group="") == [(TOPIC, 0, OK)]
        assert await delete(broker, version, "") == {"": OK}

    run(broker, body)


def test_delete_groups_after_the_last_member_left(broker: Broker) -> None:
    async def body() -> None:
        first = await stable_single(broker)
        assert await commit(
            broker, 9, (TOPIC, 0, 4, -1, ""), generation=1, member_id=first.member_id
        ) == [(TOPIC, 0, OK)]
        assert (await leave(broker, 5, (first.member_id, None))).error_code == OK
        assert await delete(broker, 2, GROUP) == {GROUP: OK}
        assert await fetch_any(broker, 9, None) == {}

    run(broker, body)


# -- OffsetDelete ----------------------------------------------------------------------------------


def test_offset_delete_subscribed_topic_of_a_live_consumer_group(broker: Broker) -> None:
    async def body() -> None:
        metadata = subscription(TOPIC)
        assert subscribed_topics(metadata) == frozenset({TOPIC})  # what the broker reads
        first = await stable_single(broker, protocols=(("range", metadata),))
        assert broker.groups.coordinator.group(GROUP).subscribed_topics == frozenset({TOPIC})
        results = await commit(
            broker,
            9,
            (TOPIC, 0, 10, -1, ""),
            (OTHER_TOPIC, 0, 20, -1, ""),
            generation=first.generation_id,
            member_id=first.member_id,
        )
        assert {error for _, _, error in results} == {OK}

        error, partitions = await delete_offsets(
            broker, {TOPIC: [0], OTHER_TOPIC: [0], MISSING_TOPIC: [0]}
        )
        assert error == OK
        assert partitions == {
            (TOPIC, 0): ErrorCode.group_subscribed_to_topic,
            (OTHER_TOPIC, 0): OK,
            (MISSING_TOPIC, 0): ErrorCode.unknown_topic_or_partition,
        }
        fetched = await fetch_any(broker, 9, None)
        assert set(fetched) == {(TOPIC, 0)}
        # Durable: a reload has the tombstone applied.
        coordinator = reloaded(broker).coordinator
        assert coordinator.committed(GROUP, TopicPartition(OTHER_TOPIC, 0)) is None
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 0)).offset == 10

    run(broker, body)


def test_offset_delete_on_an_empty_group(broker: Broker) -> None:
    async def body() -> None:
        await commit_sample(broker)
        before = offsets_log_end(broker, GROUP)
        error, partitions = await delete_offsets(broker, {TOPIC: [0, 2]})
        # Partition 2 has no offset: deleting it is still fine.
        assert (error, partitions) == (OK, {(TOPIC, 0): OK, (TOPIC, 2): OK})
        assert offset_records(broker, GROUP, before) == [  # only the one that existed
            (OffsetCommitKey(GROUP, TOPIC, 0), True)
        ]
        assert set(await fetch_any(broker, 9, None)) == {(TOPIC, 1), (OTHER_TOPIC, 0)}
        coordinator = reloaded(broker).coordinator
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 0)) is None
        assert coordinator.committed(GROUP, TopicPartition(TOPIC, 1)).offset == 20

    run(broker, body)


def test_offset_delete_fails_when_its_tombstones_cannot_be_written(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> None:
        await commit_sample(broker)
        monkeypatch.setattr(
            broker.replica_manager,
            "append_records",
            lambda entries, acks, **_: (
                {tp: ProduceResult(ErrorCode.kafka_storage_error) for tp in entries},
                None,
            ),
        )
        error, partitions = await delete_offsets(broker, {TOPIC: [0]})
        assert (error, partitions) == (ErrorCode.not_coordinator, {})

    run(broker, body)


def test_offset_delete_errors(broker: Broker) -> None:
    async def body() -> None:
        assert await delete_offsets(broker, {TOPIC: [0]}, group="ghost") == (
            ErrorCode.group_id_not_found,
            {},
        )
        assert await delete_offsets(broker, {TOPIC: [0]}, group="") == (
            ErrorCode.invalid_group_id,
            {},
        )
        # A live group that is not a consumer group refuses as a whole.
        await stable_single(broker, group="connectors", protocol_type="connect")
        assert await delete_offsets(broker, {TOPIC: [0]}, group="connectors") == (
            ErrorCode.non_empty_group,
            {},
        )

    run(broker, body)


# -- persistence in __consumer_offsets -------------------------------------------------------------


@pytest.mark.parametrize("version", COMMIT_VERSIONS)
def test_commits_are_persisted_and_reloaded(broker: Broker, version: int) -> None:
    async def body() -> None:
        group = f"persisted-{version}"
        assert offsets_log_end(broker, group) == 0
        results = await commit(
            broker, version, (TOPIC, 0, 42, 7, "meta"), (TOPIC, 2, 9, -1, None), group=group
        )
        assert {error for _, _, error in results} == {OK}
        # Both commits were appended to the group's partition before the answer.
        assert offset_records(broker, group) == [
            (OffsetCommitKey(group, TOPIC, 0), False),
            (OffsetCommitKey(group, TOPIC, 2), False),
        ]
        assert group_records(broker, group) == []  # a simple group has no metadata
        topic = broker.replica_manager.topics[OFFSETS_TOPIC]
        index = group_partition(group, len(topic.partitions))
        others = [p.log.log_end_offset for p in topic.partitions.values() if p.index != index]
        assert others == [0] * (len(topic.partitions) - 1)

        live = broker.groups.coordinator
        fresh = reloaded(broker).coordinator
        for partition in (0, 2):
            tp = TopicPartition(TOPIC, partition)
            assert fresh.committed(group, tp) == live.committed(group, tp) is not None
        assert fresh.committed(group, TopicPartition(TOPIC, 0)).leader_epoch == (
            7 if version >= 6 else -1
        )
        assert fresh.committed(group, TopicPartition(TOPIC, 0)).metadata == "meta"
        assert fresh.fetch_offsets(group) == live.fetch_offsets(group)
        assert fresh.list_groups()[0].group_id == group  # a simple group, back as Empty

        # A later commit overwrites; the reload sees the last one.
        assert await commit(broker, version, (TOPIC, 0, 43, 8, "new"), group=group) == [
            (TOPIC, 0, OK)
        ]
        assert reloaded(broker).coordinator.committed(
            group, TopicPartition(TOPIC, 0)
        ) == live.committed(group, TopicPartition(TOPIC, 0))

    run(broker, body)


def test_member_commits_are_persisted(broker: Broker) -> None:
    async def body() -> None:
        first = await stable_single(broker)
        results = await commit(
            broker, 8, (TOPIC, 1, 500, 2, "by-member"), generation=1, member_id=first.member_id
        )
        assert results == [(TOPIC, 1, OK)]
        fresh = reloaded(broker).coordinator
        assert fresh.committed(GROUP, TopicPartition(TOPIC, 1)) == OffsetAndMetadata(
            500, 2, "by-member", BASE_MS
        )

    run(broker, body)


@pytest.mark.parametrize("version", DELETE_VERSIONS)
def test_delete_groups_leaves_tombstones(broker: Broker, version: int) -> None:
    async def body() -> None:
        await commit_sample(broker, "doomed")
        await commit_sample(broker, "kept")
        before = offsets_log_end(broker, "doomed")
        assert await delete(broker, version, "doomed") == {"doomed": OK}
        tombstones = offset_records(broker, "doomed", before)
        assert len(tombstones) == 3 and set(tombstones) == {
            (OffsetCommitKey("doomed", OTHER_TOPIC, 0), True),
            (OffsetCommitKey("doomed", TOPIC, 0), True),
            (OffsetCommitKey("doomed", TOPIC, 1), True),
        }
        assert group_records(broker, "doomed", before) == [True]  # and the group's tombstone
        fresh = reloaded(broker).coordinator
        assert fresh.fetch_offsets("doomed").partitions == ()
        assert fresh.group("doomed") is None
        assert len(fresh.fetch_offsets("kept").partitions) == 3

    run(broker, body)


def test_reloaded_broker_serves_the_offsets(tmp_path: Path) -> None:
    """A broker reopened on the same log dir answers OffsetFetch from `__consumer_offsets`."""
    broker = open_group_broker(tmp_path)
    try:
        for name, partitions in ((TOPIC, 3), (OTHER_TOPIC, 1)):
            assert broker.admin_manager.create_topic(name, partitions, 1)[0].ok

        async def first_life() -> None:
            await commit_sample(broker)
            assert await delete_offsets(broker, {OTHER_TOPIC: [0]}) == (
                OK,
                {(OTHER_TOPIC, 0): OK},
            )

        run(broker, first_life)
    finally:
        broker.shutdown()
    reopened = open_group_broker(tmp_path)
    try:

        async def second_life() -> None:
            assert await fetch_any(reopened, 9, None) == {
                (TOPIC, 0): (10, 4, "m0", OK),
                (TOPIC, 1): (20, -1, "", OK),
            }
            (group,) = (await describe(reopened, 6, GROUP)).groups
            assert (group.error_code, group.group_state) == (OK, "Empty")

        run(reopened, second_life)
    finally:
        reopened.shutdown()


# -- robustness ------------------------------------------------------------------------------------


def test_a_failing_timer_round_is_logged_and_the_groups_keep_working(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug surfacing in one timer round must not stop the timer task (nor the broker)."""
    real_tick = broker.groups.coordinator.tick
    failures = [RuntimeError("injected timer failure")]

    def tick_failing_once(now_ms: int) -> None:
        if failures:
            raise failures.pop()
        real_tick(now_ms)

    monkeypatch.setattr(broker.groups.coordinator, "tick", tick_failing_once)

    async def body() -> None:
        # The join needs the timer task: the initial rebalance completes on its tick.
        joined = await stable_single(broker)
        assert joined.error_code == ErrorCode.none

    run(broker, body)
    assert not failures
    assert "group coordinator timers failed" in caplog.text
