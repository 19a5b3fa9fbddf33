"""Unloading (sans-IO): when a coordinator's internal partition moves to another broker, the
groups / transactional ids it held are forgotten, with their offsets, timers and pending
transactional offsets, and nothing is queued for the log (the new leader owns it now)."""

from __future__ import annotations

import itertools

from coordinator_harness import GROUP, Harness, form_stable_group
from kio.schema.errors import ErrorCode

from kafkalite.coordinator import OffsetCommitRequest, PartitionCommit, TopicPartition
from kafkalite.txn.coordinator import TransactionCoordinator

T0 = TopicPartition("t", 0)


def commit(harness: Harness, group: str, offset: int) -> None:
    request = OffsetCommitRequest(group, (PartitionCommit("t", 0, offset, -1, ""),), api_version=9)
    response = harness.coordinator.commit_offsets(request, harness.now)
    assert [p.error for p in response.partitions] == [ErrorCode.none]


def test_unloading_forgets_the_selected_groups_and_only_them() -> None:
    h = Harness()
    commit(h, GROUP, 7)
    commit(h, "stays", 3)
    pending = OffsetCommitRequest(GROUP, (PartitionCommit("t", 1, 9, -1, ""),), api_version=9)
    assert h.coordinator.txn_commit_offsets(pending, 42).partitions[0].error is ErrorCode.none
    form_stable_group(h)
    h.coordinator.take_changes()
    assert {t.group_id for t in h.coordinator.timers()} == {GROUP}

    assert h.coordinator.unload_groups(lambda group_id: group_id == GROUP) == [GROUP]

    assert h.coordinator.group(GROUP) is None
    assert h.coordinator.committed(GROUP, T0) is None
    assert h.coordinator.pending_txn_groups(42) == []
    assert h.coordinator.timers() == []
    assert h.coordinator.take_changes() == []  # nothing to write: the new leader has it all
    assert h.coordinator.committed("stays", T0).offset == 3


def test_unloading_forgets_the_selected_transactional_ids() -> None:
    ids = itertools.count(1000)
    c = TransactionCoordinator(lambda: next(ids))
    for tid in ("moved", "stays"):
        assert c.init_producer_id(tid, 60_000, 0).error is ErrorCode.none
    assert c.unload(lambda tid: tid == "moved") == ["moved"]
    assert c.describe("moved") is None
    assert c.describe("stays") is not None
    assert [meta.transactional_id for meta in c.take_changes()] == ["stays"]
