"""DescribeGroups, ListGroups and DeleteGroups views of the coordinator."""

from __future__ import annotations

from coordinator_harness import GROUP, Harness, form_stable_group
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import (
    DescribedMember,
    OffsetCommitRequest,
    PartitionCommit,
    TopicPartition,
)

OK = ErrorCode.none


def test_describe_a_stable_group_with_metadata_and_assignments():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"))
    described = h.coordinator.describe_group(GROUP, api_version=5)
    assert (described.error, described.state) == (OK, "Stable")
    assert (described.protocol_type, described.protocol_data) == ("consumer", "range")
    assert described.members == (
        DescribedMember(a, None, "a", "/127.0.0.1", b"range-meta", a.encode()),
        DescribedMember(b, None, "b", "/127.0.0.1", b"range-meta", b.encode()),
    )


def test_describe_mid_rebalance_omits_metadata_and_protocol():
    h = Harness()
    (a, b), generation = form_stable_group(h, ("a", "b"))
    h.join(a)
    described = h.coordinator.describe_group(GROUP, api_version=5)
    assert (described.state, described.protocol_type, described.protocol_data) == (
        "PreparingRebalance",
        "consumer",
        "",
    )
    assert [(m.metadata, m.assignment) for m in described.members] == [
        (b"", a.encode()),
        (b"", b.encode()),
    ]


def test_describe_unknown_group_by_version():
    h = Harness()
    old = h.coordinator.describe_group("nope", api_version=5)
    assert (old.error, old.state, old.members) == (OK, "Dead", ())
    new = h.coordinator.describe_group("nope", api_version=6)
    assert (new.error, new.state) == (ErrorCode.group_id_not_found, "Dead")
    assert new.error_message == "Group nope not found."


def test_describe_static_member_and_empty_group():
    h = Harness()
    ticket = h.join("", client_id="c", instance="i1")
    h.advance(0)
    member_id = h.answer(ticket).member_id
    described = h.coordinator.describe_group(GROUP, api_version=5)
    assert described.state == "CompletingRebalance"
    assert described.members[0].group_instance_id == "i1"
    h.leave(member_id)
    empty = h.coordinator.describe_group(GROUP, api_version=5)
    assert (empty.state, empty.protocol_type, empty.members) == ("Empty", "consumer", ())


def test_list_groups_with_filters():
    h = Harness()
    form_stable_group(h, ("a",))
    h.new_member("b", group="rebalancing")
    h.coordinator.commit_offsets(
        OffsetCommitRequest("simple", (PartitionCommit("t", 0, 1),), api_version=9), h.now
    )
    listed = {
        g.group_id: (g.protocol_type, g.state, g.group_type) for g in h.coordinator.list_groups()
    }
    assert listed == {
        GROUP: ("consumer", "Stable", "classic"),
        "rebalancing": ("consumer", "PreparingRebalance", "classic"),
        "simple": ("", "Empty", "classic"),
    }
    by_state = h.coordinator.list_groups(states=["stable", "EMPTY"])
    assert sorted(g.group_id for g in by_state) == [GROUP, "simple"]
    assert h.coordinator.list_groups(states=["Dead"]) == []
    assert len(h.coordinator.list_groups(types=["Classic"])) == 3
    assert h.coordinator.list_groups(types=["consumer"]) == []


def test_delete_groups():
    h = Harness()
    form_stable_group(h, ("a",))
    h.coordinator.commit_offsets(
        OffsetCommitRequest("simple", (PartitionCommit("t", 0, 1),), api_version=9), h.now
    )
    group = h.coordinator.group("simple")
    results = h.coordinator.delete_groups([GROUP, "simple", "nope"], h.now)
    assert results == {
        GROUP: ErrorCode.non_empty_group,
        "simple": OK,
        "nope": ErrorCode.group_id_not_found,
    }
    assert str(group.state) == "Dead"
    assert h.coordinator.group("simple") is None
    assert h.coordinator.committed("simple", TopicPartition("t", 0)) is None
    assert h.coordinator.delete_groups(["simple"], h.now) == {
        "simple": ErrorCode.group_id_not_found
    }
    # A deleted group can be recreated from scratch.
    h.coordinator.commit_offsets(
        OffsetCommitRequest("simple", (PartitionCommit("t", 0, 2),), api_version=9), h.now
    )
    assert h.coordinator.committed("simple", TopicPartition("t", 0)).offset == 2


def test_deleting_a_group_drops_its_pending_timers():
    h = Harness()
    pending = h.answer(h.join("")).member_id
    assert [t.member_id for t in h.coordinator.timers()] == [pending]
    assert h.coordinator.delete_groups([GROUP], h.now) == {GROUP: OK}
    assert h.coordinator.timers() == [] and h.coordinator.next_deadline() is None
