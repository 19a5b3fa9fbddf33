"""Kafka's per-partition gauges and the ReplicaManager's under/at-min-ISR counts: only a
partition's leader reports them, against the effective min.insync.replicas."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from kafkalite.broker.partition import Partition
from kafkalite.metrics import partition_gauges
from tests.broker.partition_fixtures import LOCAL, TOPIC, open_partition, state


@dataclass
class Topic:
    name: str
    partitions: dict[int, Partition]


@dataclass
class Replicas:
    topics: dict[str, Topic]
    min_isr: int

    def min_insync_replicas(self, tp: tuple[str, int]) -> int:
        return self.min_isr


def scrape(partition: Partition, min_isr: int) -> dict[str, float]:
    replicas = Replicas({TOPIC: Topic(TOPIC, {0: partition})}, min_isr)
    return {
        sample.name: sample.value
        for family in partition_gauges.collect(replicas)  # type: ignore[arg-type]
        for sample in family.samples
    }


def test_a_leader_below_min_isr(tmp_path: Path) -> None:
    partition = open_partition(tmp_path)
    assert partition.make_leader(state(LOCAL, 0, (LOCAL, 2, 3), (LOCAL,)), now_ms=0) == (
        ErrorCode.none
    )
    values = scrape(partition, min_isr=2)
    assert values == {
        "kafka_cluster_partition_underreplicated": 1,
        "kafka_cluster_partition_insyncreplicascount": 1,
        "kafka_cluster_partition_replicascount": 3,
        "kafka_cluster_partition_underminisr": 1,
        "kafka_cluster_partition_atminisr": 0,
        "kafka_cluster_partition_laststableoffsetlag": 0,
        "kafka_server_replicamanager_underminisrpartitioncount": 1,
        "kafka_server_replicamanager_atminisrpartitioncount": 0,
    }


def test_min_isr_is_capped_at_the_replication_factor(tmp_path: Path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(LOCAL, 0, (LOCAL,), (LOCAL,)), now_ms=0)
    values = scrape(partition, min_isr=2)  # Kafka's effectiveMinIsr: 1 for one replica
    assert values["kafka_cluster_partition_underminisr"] == 0
    assert values["kafka_server_replicamanager_atminisrpartitioncount"] == 1


def test_a_follower_reports_zeros(tmp_path: Path) -> None:
    partition = open_partition(tmp_path)
    assert partition.make_follower(state(2, 0, (2, LOCAL), (2,))) == ErrorCode.none
    assert set(scrape(partition, min_isr=2).values()) == {0}
