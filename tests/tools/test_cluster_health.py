"""`kafkalite cluster health`: the judgement (tools/health.py `assess`) on made-up cluster
states, and the command against a real single-node broker."""

from __future__ import annotations

from compat.cli_runner import kafkalite_here, ok, ok_json
from kafkalite.tools.health import PartitionState, assess


def state(topic: str, partition: int, leader: int, replicas: str, isr: str) -> PartitionState:
    ids = lambda text: tuple(int(i) for i in text.split(",") if i)  # noqa: E731
    return PartitionState(topic, partition, leader, ids(replicas), ids(isr))


def test_a_healthy_cluster() -> None:
    health = assess([1, 2, 3], [state("t", 0, 1, "1,2,3", "1,2,3")], {"t": 2})
    assert health.healthy
    assert (health.brokers, health.partitions, health.dead_brokers) == ([1, 2, 3], 1, [])


def test_a_dead_broker_and_the_partitions_it_leaves_behind() -> None:
    partitions = [
        state("a", 0, -1, "3", ""),  # its only replica is on the dead broker
        state("a", 1, 1, "1,3", "1"),  # lost a follower: under-replicated, min ISR 2 missed
        state("b", 0, 2, "2,3", "2"),  # lost a follower: under-replicated, min ISR 1 kept
        state("b", 1, 1, "1,2", "1,2"),
    ]
    health = assess([1, 2], partitions, {"a": 2, "b": 1})
    assert not health.healthy
    assert health.dead_brokers == [3]
    assert health.offline == [partitions[0]]
    assert health.under_replicated == [partitions[1], partitions[2]]
    assert health.under_min_isr == [partitions[1]]
    assert health.partitions == 4


def test_health_of_a_single_node(broker_factory) -> None:
    broker = broker_factory()
    bootstrap = ["-b", broker.bootstrap]
    ok(kafkalite_here("topic", "create", "h", "-p", "3", *bootstrap))
    report = ok_json(kafkalite_here("cluster", "health", *bootstrap, "--format", "json"))
    (node,) = report["brokers"]
    assert report == {
        "healthy": True,
        "brokers": [node],
        "dead_brokers": [],
        "partitions": 3,
        "offline": [],
        "under_replicated": [],
        "under_min_isr": [],
    }
    text = ok(kafkalite_here("cluster", "health", *bootstrap))
    assert text == f"Healthy: brokers {node}, dead brokers none, 3 partitions\n"


def test_a_topic_whose_isr_is_below_its_min_isr_makes_the_cluster_unhealthy(
    broker_factory,
) -> None:
    broker = broker_factory()
    bootstrap = ["-b", broker.bootstrap]
    ok(kafkalite_here("topic", "create", "m", "-c", "min.insync.replicas=2", *bootstrap))
    result = kafkalite_here("cluster", "health", *bootstrap)
    assert (result.returncode, result.stderr) == (1, "")
    (node,) = ok_json(kafkalite_here("cluster", "info", *bootstrap, "--format", "json"))["brokers"]
    assert result.stdout.splitlines() == [
        f"Unhealthy: brokers {node['id']}, dead brokers none, 1 partitions",
        "PROBLEM        TOPIC  PARTITION  LEADER  REPLICAS  ISR",
        f"under-min-isr  m      0          {node['id']}       {node['id']}         {node['id']}",
    ]
