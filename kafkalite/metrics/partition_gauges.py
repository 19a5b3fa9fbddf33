"""Kafka's per-partition gauges (kafka.cluster:type=Partition) and the ReplicaManager's counts
of partitions under or at their minimum ISR.

As in Kafka's Partition, every hosted partition has the gauges and only its leader reports
non-zero values (a follower's view of the ISR is not the partition's), so summing a gauge
over all brokers counts each partition once. The minimum ISR is Kafka's effective one:
min.insync.replicas capped at the replication factor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager

_PARTITION_GAUGES = {
    "underreplicated": "1 if the leader's ISR is smaller than the replica set",
    "insyncreplicascount": "ISR size (on the leader)",
    "replicascount": "Replication factor (on the leader)",
    "underminisr": "1 if the leader's ISR is below the effective min.insync.replicas",
    "atminisr": "1 if the leader's ISR is at the effective min.insync.replicas",
    "laststableoffsetlag": "High watermark minus last stable offset (on the leader)",
}


def _values(partition: Partition, min_isr: int) -> dict[str, int]:
    if not partition.is_leader:
        return dict.fromkeys(_PARTITION_GAUGES, 0)
    isr, replicas = len(partition.isr), len(partition.replicas)
    effective = partition.effective_min_isr(min_isr)
    return {
        "underreplicated": int(isr < replicas),
        "insyncreplicascount": isr,
        "replicascount": replicas,
        "underminisr": int(isr < effective),
        "atminisr": int(isr == effective),
        "laststableoffsetlag": partition.high_watermark - partition.last_stable_offset,
    }


def collect(replicas: ReplicaManager) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    families = {
        name: GaugeMetricFamily(f"kafka_cluster_partition_{name}", doc, labels=labels)
        for name, doc in _PARTITION_GAUGES.items()
    }
    under_min = at_min = 0
    for topic in replicas.topics.values():
        min_isr = replicas.min_insync_replicas((topic.name, 0))  # a topic config
        for partition in topic.partitions.values():
            values = _values(partition, min_isr)
            for name, value in values.items():
                families[name].add_metric([topic.name, str(partition.index)], value)
            under_min += values["underminisr"]
            at_min += values["atminisr"]
    yield from families.values()
    prefix = "kafka_server_replicamanager_"
    yield GaugeMetricFamily(
        prefix + "underminisrpartitioncount", "Led partitions under min ISR", value=under_min
    )
    yield GaugeMetricFamily(
        prefix + "atminisrpartitioncount", "Led partitions at min ISR", value=at_min
    )
