"""Committed offsets: OffsetCommit validation as Kafka, OffsetFetch, and expiry."""

from __future__ import annotations

import struct

import pytest
from coordinator_harness import GROUP, Harness, form_stable_group
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import (
    OffsetAndMetadata,
    OffsetCommitRequest,
    PartitionCommit,
    Protocol,
    TopicPartition,
)
from kafkalite.coordinator.consumer_protocol import subscribed_topics

OK = ErrorCode.none
T0 = TopicPartition("orders", 0)


def commit(h: Harness, *partitions: PartitionCommit, group: str = GROUP, **fields):
    fields.setdefault("api_version", 9)
    request = OffsetCommitRequest(group, tuple(partitions), **fields)
    response = h.coordinator.commit_offsets(request, h.now)
    h.drain()
    return [r.error for r in response.partitions]


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription: int16 version, topics, then whatever follows."""
    body = struct.pack(">hi", version, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1) + b"\x00\x00\x00\x00"  # user data, owned partitions


def test_simple_consumer_commit_creates_an_empty_group():
    h = Harness()
    assert commit(h, PartitionCommit("orders", 0, 42, leader_epoch=3, metadata="m")) == [OK]
    assert h.state() == "Empty"
    assert h.group().protocol_type is None
    assert h.coordinator.committed(GROUP, T0) == OffsetAndMetadata(
        42, leader_epoch=3, metadata="m", commit_timestamp_ms=h.now
    )
    fetched = h.coordinator.fetch_offsets(GROUP, [T0, TopicPartition("orders", 1)])
    assert fetched.error is OK
    assert [(p.partition, p.offset, p.leader_epoch, p.metadata) for p in fetched.partitions] == [
        (0, 42, 3, "m"),
        (1, -1, -1, ""),
    ]


def test_null_metadata_is_stored_empty_and_fetch_all_lists_everything():
    h = Harness()
    commit(h, PartitionCommit("a", 0, 1, metadata=None), PartitionCommit("b", 2, 7))
    everything = h.coordinator.fetch_offsets(GROUP)
    assert [(p.topic, p.partition, p.offset, p.metadata) for p in everything.partitions] == [
        ("a", 0, 1, ""),
        ("b", 2, 7, ""),
    ]


def test_fetch_from_unknown_group_is_not_an_error():
    h = Harness()
    fetched = h.coordinator.fetch_offsets("nobody", [T0])
    assert fetched.error is OK and fetched.partitions[0].offset == -1
    assert h.coordinator.fetch_offsets("nobody").partitions == ()


@pytest.mark.parametrize(
    ("version", "error"), [(8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)]
)
def test_member_commit_to_a_missing_group(version, error):
    h = Harness()
    errors = commit(
        h, PartitionCommit("t", 0, 1), api_version=version, generation_id=3, member_id="m"
    )
    assert errors == [error]
    assert h.state() == "missing"


def test_commits_from_a_stable_group():
    h = Harness()
    (a, b, c), generation = form_stable_group(h)
    p = PartitionCommit("orders", 0, 10)
    assert commit(h, p, generation_id=generation, member_id=a) == [OK]
    assert commit(h, p, generation_id=generation - 1, member_id=a) == [ErrorCode.illegal_generation]
    assert commit(h, p, generation_id=generation, member_id="x") == [ErrorCode.unknown_member_id]
    # An anonymous commit would fight the members over their offsets.
    assert commit(h, p) == [ErrorCode.unknown_member_id]
    # A member id with generation -1 is still checked against the generation.
    assert commit(h, p, member_id=a) == [ErrorCode.illegal_generation]


def test_commit_keeps_the_session_alive():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",))
    for _ in range(5):
        h.advance(6_000)
        assert commit(h, PartitionCommit("t", 0, 1), generation_id=generation, member_id=a) == [OK]
    assert h.state() == "Stable"  # 30 s without heartbeats, but commits count


def test_commits_during_rebalances():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"))
    p = PartitionCommit("t", 0, 5)
    ta = h.join(a)  # PreparingRebalance: the old generation may still commit
    assert commit(h, p, generation_id=generation, member_id=b) == [OK]
    h.join(b)
    assert h.state() == "CompletingRebalance"
    assert commit(h, p, generation_id=generation + 1, member_id=b) == [
        ErrorCode.rebalance_in_progress
    ]
    assert h.answer(ta).generation_id == generation + 1


def test_commit_to_an_empty_group_by_a_former_member():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",))
    h.leave(a)
    assert commit(h, PartitionCommit("t", 0, 1), generation_id=generation, member_id=a) == [
        ErrorCode.unknown_member_id
    ]
    assert commit(h, PartitionCommit("t", 0, 1)) == [OK]  # the admin client may, though


def test_metadata_size_limit_counts_utf16_units():
    h = Harness()
    limit = h.coordinator.config.offset_metadata_max_bytes
    errors = commit(
        h,
        PartitionCommit("t", 0, 1, metadata="x" * limit),
        PartitionCommit("t", 1, 1, metadata="x" * (limit + 1)),
        # 2048 emoji are 4096 UTF-16 units (8192 UTF-8 bytes): exactly at the limit.
        PartitionCommit("t", 2, 1, metadata="😀" * (limit // 2)),
        PartitionCommit("t", 3, 1, metadata="😀" * (limit // 2) + "x"),
    )
    assert errors == [
        OK,
        ErrorCode.offset_metadata_too_large,
        OK,
        ErrorCode.offset_metadata_too_large,
    ]
    assert h.coordinator.committed(GROUP, TopicPartition("t", 1)) is None


def test_retention_time_sets_an_expiry():
    h = Harness()
    commit(h, PartitionCommit("t", 0, 1), api_version=4, retention_time_ms=5_000)
    stored = h.coordinator.committed(GROUP, TopicPartition("t", 0))
    assert stored.expire_timestamp_ms == h.now + 5_000
    h.advance(4_999)
    assert h.coordinator.expire_offsets(h.now, retention_ms=10**9).partitions == {}
    h.advance(1)
    expired = h.coordinator.expire_offsets(h.now, retention_ms=10**9)
    assert expired.partitions == {GROUP: [TopicPartition("t", 0)]}
    assert expired.deleted_groups == [GROUP]  # an Empty group with no offsets left goes


def test_simple_group_offsets_expire_from_their_commit():
    h = Harness()
    commit(h, PartitionCommit("t", 0, 1))
    h.advance(1_000)
    commit(h, PartitionCommit("t", 1, 1))
    h.advance(9_000)
    result = h.coordinator.expire_offsets(h.now, retention_ms=10_000)
    assert result.partitions == {GROUP: [TopicPartition("t", 0)]}
    assert result.deleted_groups == []
    h.advance(1_000)
    result = h.coordinator.expire_offsets(h.now, retention_ms=10_000)
    assert result.deleted_groups == [GROUP]
    assert h.state() == "missing"
    assert h.coordinator.list_groups() == []


def test_empty_consumer_group_offsets_age_from_when_it_emptied():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",))
    commit(h, PartitionCommit("t", 0, 1), generation_id=generation, member_id=a)
    h.advance(5_000)
    h.leave(a)
    emptied_at = h.now
    h.advance(9_999)
    assert h.coordinator.expire_offsets(h.now, retention_ms=10_000).partitions == {}
    h.advance_to(emptied_at + 10_000)
    result = h.coordinator.expire_offsets(h.now, retention_ms=10_000)
    assert result.partitions == {GROUP: [TopicPartition("t", 0)]}
    assert result.deleted_groups == [GROUP]


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics():
    h = Harness()
    protocols = [Protocol("range", subscription("orders"))]
    (a,), generation = form_stable_group(h, ("a",), protocols=protocols, session_ms=60_000)
    assert h.group().subscribed_topics == frozenset({"orders"})
    commit(
        h,
        PartitionCommit("orders", 0, 1),
        PartitionCommit("old", 0, 1),
        generation_id=generation,
        member_id=a,
    )
    h.advance(20_000)
    result = h.coordinator.expire_offsets(h.now, retention_ms=10_000)
    assert result.partitions == {GROUP: [TopicPartition("old", 0)]}
    assert h.coordinator.committed(GROUP, T0) is not None
    assert result.deleted_groups == []


def test_groups_in_a_rebalance_keep_their_offsets():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"), session_ms=60_000)
    commit(h, PartitionCommit("t", 0, 1), generation_id=generation, member_id=a)
    h.join(a, session_ms=60_000)
    h.advance(20_000)
    assert h.coordinator.expire_offsets(h.now, retention_ms=1).partitions == {}


def test_subscribed_topics_parsing():
    assert subscribed_topics(subscription("a", "b", version=0)) == {"a", "b"}
    assert subscribed_topics(subscription(version=3)) == frozenset()
    assert subscribed_topics(b"") is None
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x02\x00\x01a") is None  # truncated
    assert subscribed_topics(b"\x00\x00\xff\xff\xff\xff") is None  # negative count


def test_unparsable_consumer_metadata_means_subscribed_to_everything():
    h = Harness()
    (a,), generation = form_stable_group(h, ("a",), session_ms=60_000)
    assert h.group().subscribed_topics is None
    assert h.group().is_subscribed_to_topic("anything")
    commit(h, PartitionCommit("t", 0, 1), generation_id=generation, member_id=a)
    h.advance(20_000)
    assert h.coordinator.expire_offsets(h.now, retention_ms=1).partitions == {}
