"""The coordinators' partition ownership (sans-IO): loads start on election, install only
while their election holds, and resignations drop what was loaded or loading."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions

LOADING = ErrorCode.coordinator_load_in_progress


def test_an_election_loads_then_serves_the_partition() -> None:
    owned = CoordinatorPartitions()
    assert owned.error(0) is ErrorCode.not_coordinator
    assert owned.elect(0, 3) is True
    assert (owned.error(0), owned.epoch(0)) == (LOADING, 3)
    assert owned.complete_load(0, 3) is True
    assert (owned.error(0), owned.epoch(0)) == (ErrorCode.none, 3)
    assert owned.error(1) is ErrorCode.not_coordinator


def test_an_epoch_already_served_or_passed_starts_no_load() -> None:
    owned = CoordinatorPartitions()
    owned.elect(0, 3)
    owned.complete_load(0, 3)
    assert [owned.elect(0, 3), owned.elect(0, 2)] == [False, False]
    assert owned.error(0) is ErrorCode.none


def test_a_broker_staying_leader_in_a_newer_epoch_keeps_its_coordinator_epoch() -> None:
    owned = CoordinatorPartitions()
    owned.elect(0, 3)
    assert owned.elect(0, 4) is False  # still loading in epoch 3
    assert owned.complete_load(0, 3) is True
    assert owned.elect(0, 5) is False
    assert (owned.error(0), owned.epoch(0)) == (ErrorCode.none, 3)


def test_a_load_overtaken_by_a_resignation_installs_nothing() -> None:
    owned = CoordinatorPartitions()
    owned.elect(0, 3)
    assert owned.resign(0, 4) is True
    assert owned.is_loading(0, 3) is False
    assert owned.complete_load(0, 3) is False
    assert (owned.error(0), owned.epoch(0)) == (ErrorCode.not_coordinator, -1)


def test_a_resignation_from_an_older_epoch_keeps_the_partition() -> None:
    owned = CoordinatorPartitions()
    owned.elect(0, 5)
    owned.complete_load(0, 5)
    assert owned.resign(0, 4) is False
    assert owned.resign(0, 5) is False
    assert owned.error(0) is ErrorCode.none
    assert owned.resign(0, None) is True  # the replica was removed
    assert owned.error(0) is ErrorCode.not_coordinator
    assert owned.resign(0, None) is False
