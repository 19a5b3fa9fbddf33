"""The console's health model: flagged partitions and brokers that left the cluster."""

from __future__ import annotations

from kafkalite.console.health import BrokerRegistry, count_problems, partition_health


def broker(broker_id: int, controller: bool = False) -> dict:
    return {
        "id": broker_id,
        "host": "h",
        "port": 9092 + broker_id,
        "rack": None,
        "controller": controller,
    }


def test_healthy_partition_has_no_flag() -> None:
    flags = partition_health(1, [1, 2, 3], [1, 2, 3], 2, {1, 2, 3})
    assert flags == {"offline": False, "under_min_isr": False, "under_replicated": False}


def test_a_replica_out_of_sync_is_under_replicated_only_while_the_isr_meets_min_isr() -> None:
    assert partition_health(1, [1, 2, 3], [1, 2], 2, {1, 2}) == {
        "offline": False,
        "under_min_isr": False,
        "under_replicated": True,
    }
    assert partition_health(1, [1, 2, 3], [1], 2, {1}) == {
        "offline": False,
        "under_min_isr": True,
        "under_replicated": True,
    }


def test_no_leader_or_a_dead_leader_is_offline() -> None:
    for leader, live in ((-1, {2, 3}), (1, {2, 3})):
        assert partition_health(leader, [1], [1], 1, live) == {
            "offline": True,
            "under_min_isr": True,
            "under_replicated": False,
        }


def test_count_problems_counts_each_flag() -> None:
    flags = [
        partition_health(1, [1, 2], [1, 2], 2, {1, 2}),
        partition_health(1, [1, 2], [1], 2, {1}),
        partition_health(-1, [2], [2], 1, {1}),
    ]
    assert count_problems(flags) == {"offline": 1, "under_min_isr": 2, "under_replicated": 1}


def test_a_broker_seen_then_gone_is_listed_offline_and_back_online_when_it_returns() -> None:
    registry = BrokerRegistry()
    everyone = registry.observe([broker(0, True), broker(1), broker(2)], [0, 1, 2])
    assert [(b["id"], b["online"]) for b in everyone] == [(0, True), (1, True), (2, True)]

    after = registry.observe([broker(0, True), broker(2)], [0, 1, 2])
    assert [(b["id"], b["online"]) for b in after] == [(0, True), (1, False), (2, True)]
    assert after[1] == {**broker(1), "online": False}  # its last known address, not controller

    back = registry.observe([broker(0), broker(1, True), broker(2)], [0, 1, 2])
    assert [(b["id"], b["online"], b["controller"]) for b in back] == [
        (0, True, False),
        (1, True, True),
        (2, True, False),
    ]


def test_a_broker_known_only_from_replica_lists_is_offline() -> None:
    listed = BrokerRegistry().observe([broker(0, True)], [0, 3])
    assert listed == [
        {**broker(0, True), "online": True},
        {"id": 3, "host": None, "port": None, "rack": None, "controller": False, "online": False},
    ]
