"""kafka-exporter's cluster series (danielqsj/kafka_exporter, Strimzi's "Kafka Exporter"
dashboard), served by the brokers themselves.

kafka-exporter is one process asking the cluster; here every broker serves a part, so that
summing a series over all brokers counts each thing once:
* brokers and topics (`kafka_brokers`, `kafka_broker_info`, `kafka_topic_partitions`) and each
  partition's assignment (replicas, ISR, leader) come from the active controller, whose
  metadata decides them (a single node is its own controller);
* a partition's offsets (`kafka_topic_partition_current_offset`: the high watermark, as
  kafka-exporter's ListOffsets latest answers; `_oldest_offset`: the log start) come from its
  leader, which alone knows them.
Consumer-group series (kafka_consumergroup_*) come from each group's coordinator (collector.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from kafkalite.broker.broker import Broker

_ASSIGNMENT = {
    "replicas": "Number of replicas of the partition",
    "in_sync_replica": "Number of in-sync replicas of the partition",
    "leader": "Leader broker id of the partition (-1: none)",
    "leader_is_preferred": "1 if the leader is the preferred (first) replica",
    "under_replicated_partition": "1 if the ISR is smaller than the replica set",
}


def collect(broker: Broker, listener: str) -> Iterator[Metric]:
    metadata = broker.metadata
    if metadata.controller_id() == broker.node_id:
        yield from _cluster(broker, listener)
    yield from _offsets(broker)


def _cluster(broker: Broker, listener: str) -> Iterator[Metric]:
    metadata = broker.metadata
    brokers = metadata.brokers()
    yield GaugeMetricFamily("kafka_brokers", "Number of brokers in the cluster", len(brokers))
    info = GaugeMetricFamily("kafka_broker_info", "A broker", labels=["address", "id"])
    for each in brokers:
        endpoint = each.endpoint(listener) or (each.endpoints[0] if each.endpoints else None)
        address = f"{endpoint.host}:{endpoint.port}" if endpoint is not None else ""
        info.add_metric([address, str(each.broker_id)], 1)
    yield info
    partitions = GaugeMetricFamily(
        "kafka_topic_partitions", "Number of partitions of the topic", labels=["topic"]
    )
    labels = ["topic", "partition"]
    families = {
        name: GaugeMetricFamily(f"kafka_topic_partition_{name}", doc, labels=labels)
        for name, doc in _ASSIGNMENT.items()
    }
    for name, topic in sorted(metadata.topics.items()):
        partitions.add_metric([name], topic.num_partitions)
        for state in metadata.partition_states(name):
            key = [name, str(state.partition)]
            preferred = bool(state.replicas) and state.replicas[0] == state.leader
            families["replicas"].add_metric(key, len(state.replicas))
            families["in_sync_replica"].add_metric(key, len(state.isr))
            families["leader"].add_metric(key, state.leader)
            families["leader_is_preferred"].add_metric(key, int(preferred))
            families["under_replicated_partition"].add_metric(
                key, int(len(state.isr) < len(state.replicas))
            )
    yield partitions
    yield from families.values()


def _offsets(broker: Broker) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    current = GaugeMetricFamily(
        "kafka_topic_partition_current_offset", "Newest offset (high watermark)", labels=labels
    )
    oldest = GaugeMetricFamily(
        "kafka_topic_partition_oldest_offset", "Oldest offset (log start)", labels=labels
    )
    for topic in broker.replica_manager.topics.values():
        for partition in topic.partitions.values():
            if partition.is_leader:
                key = [topic.name, str(partition.index)]
                current.add_metric(key, partition.high_watermark)
                oldest.add_metric(key, partition.log_start_offset)
    yield current
    yield oldest
