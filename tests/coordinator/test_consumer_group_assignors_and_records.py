"""The server-side assignors (uniform, range) and the consumer group records' bytes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordinator import consumer_group_records as records
from kafkalite.coordinator.consumer_group import ConsumerMember, MemberState, TopicInfo
from kafkalite.coordinator.consumer_group_assignors import range_, uniform
from kafkalite.coordinator.records import InvalidRecord

T = TopicInfo(uuid.UUID(int=1), "t", 7)
U = TopicInfo(uuid.UUID(int=2), "u", 3)
TOPICS = {"t": T, "u": U}


def counts(assignment: dict) -> list[int]:
    return sorted(len(p) for p in assignment.values())


@settings(max_examples=100, deadline=None)
@given(members=st.integers(1, 9), partitions=st.integers(0, 30))
def test_uniform_spreads_evenly_and_moves_little_when_a_member_joins(
    members: int, partitions: int
) -> None:
    topic = TopicInfo(uuid.UUID(int=9), "x", partitions)
    subscriptions = {f"m{i}": ("x",) for i in range(members)}
    first = uniform(subscriptions, {"x": topic}, {})
    assert sum(counts(first)) == partitions
    assert max(counts(first)) - min(counts(first)) <= 1
    grown = uniform({**subscriptions, "new": ("x",)}, {"x": topic}, first)
    assert max(counts(grown)) - min(counts(grown)) <= 1
    moved = sum(len(first[m] - grown[m]) for m in first)
    assert moved == len(grown["new"]), "only the newcomer's share moved"


def test_uniform_gives_each_topic_only_to_its_subscribers() -> None:
    result = uniform({"a": ("t",), "b": ("t", "u"), "c": ("u",)}, TOPICS, {})
    assert all(tp[0] == T.topic_id for tp in result["a"])
    assert all(tp[0] == U.topic_id for tp in result["c"])
    assert frozenset().union(*result.values()) == {
        *((T.topic_id, p) for p in range(7)),
        *((U.topic_id, p) for p in range(3)),
    }
    assert counts(result) == [3, 3, 4]


def test_range_gives_contiguous_ranges_per_topic() -> None:
    result = range_({"b": ("t",), "a": ("t", "u")}, TOPICS, {})
    assert result["a"] == {(T.topic_id, p) for p in range(4)} | {(U.topic_id, p) for p in range(3)}
    assert result["b"] == {(T.topic_id, p) for p in range(4, 7)}


def test_keys_are_kafkas_bytes() -> None:
    assert records.encode_key(records.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    member_key = records.encode_key(records.CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    assert member_key == b"\x00\x08\x00\x01g\x00\x01m"
    assert records.decode_key(member_key) == records.ConsumerGroupKey(8, "g", "m")
    assert records.decode_key(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00") is None


def test_values_are_kafkas_bytes() -> None:
    # int16 version 0, int32 epoch, no tagged fields.
    assert records.group_epoch("g", 7).value == b"\x00\x00\x00\x00\x00\x07\x00"
    target = records.target_assignment_member("g", "m", frozenset({(T.topic_id, 2)}))
    # [TopicPartition]: compact count 1+1, uuid, compact count 1+1, int32 2, tags, tags.
    assert target.value == b"\x00\x00\x02" + T.topic_id.bytes + b"\x02\x00\x00\x00\x02\x00\x00"


def test_values_round_trip() -> None:
    member = ConsumerMember(
        "m",
        instance_id="i",
        rack_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=("t", "u"),
        rebalance_timeout_ms=300_000,
        server_assignor="range",
        member_epoch=4,
        previous_member_epoch=3,
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned=frozenset({(T.topic_id, 0), (U.topic_id, 1)}),
        pending_revocation=frozenset({(T.topic_id, 5)}),
    )
    metadata = records.member_metadata("g", member).value
    assert metadata is not None
    loaded = records.decode_member_metadata("m", metadata)
    assert (loaded.instance_id, loaded.subscribed_topic_names, loaded.server_assignor) == (
        "i",
        ("t", "u"),
        "range",
    )
    current = records.current_member_assignment("g", member).value
    assert current is not None
    assert records.decode_current_member_assignment(current) == records.CurrentAssignment(
        4, 3, MemberState.UNREVOKED_PARTITIONS, member.assigned, member.pending_revocation
    )
    partitions = records.partition_metadata("g", 2, TOPICS).value
    assert partitions is not None
    assert records.decode_partition_metadata(partitions) == (2, TOPICS)


def test_unknown_versions_and_truncation_are_invalid() -> None:
    value = records.group_epoch("g", 1).value
    assert value is not None
    with pytest.raises(InvalidRecord):
        records.decode_group_epoch(b"\x00\x01" + value[2:])
    with pytest.raises(InvalidRecord):
        records.decode_group_epoch(value[:-2])
