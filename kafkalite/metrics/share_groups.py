"""Share groups' metrics (KIP-932, issue 16), from the share-partitions this broker leads:
Kafka's RecordAcknowledgementsPerSec (ShareGroupMetrics, by ackType; here also by group),
AcquisitionLockTimeoutPerSec and InFlightMessageCount (SharePartitionMetrics, by group, topic
and partition), the dead-letter meters of KIP-1191 (ShareGroupMetrics' DeadLetterQueue*, by
group), and kafkalite's own acquired and archived record counts per group.

Counters restart when a share-partition's leadership moves away and back (its counts live
with its in-memory state), which Prometheus' rate() takes as a reset."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from kafkalite.broker.share_partition_manager import SharePartitionManager

GROUP = "kafka_server_sharegroupmetrics_"
PARTITION = "kafka_server_sharepartitionmetrics_"
OWN = "kafkalite_sharegroup_"


def collect(manager: SharePartitionManager | None) -> Iterator[Metric]:
    if manager is None:
        return
    acks = CounterMetricFamily(
        GROUP + "recordacknowledgements",
        "Records acknowledged, by acknowledgement type",
        labels=["group", "acktype"],
    )
    timeouts = CounterMetricFamily(
        PARTITION + "acquisitionlocktimeout",
        "Records whose acquisition lock expired",
        labels=["group", "topic", "partition"],
    )
    in_flight = GaugeMetricFamily(
        PARTITION + "inflightmessagecount",
        "Records between the share-partition start and end offsets",
        labels=["group", "topic", "partition"],
    )
    by_ack: Counter[tuple[str, str]] = Counter()
    acquired: Counter[str] = Counter()
    archived: Counter[str] = Counter()
    for held in manager.held.values():
        group, counts = held.key.group_id, held.state.counts
        where = [group, held.topic, str(held.key.partition)]
        timeouts.add_metric(where, counts.lock_timeouts)
        in_flight.add_metric(where, held.state.in_flight())
        for kind, count in counts.acknowledgements.items():
            by_ack[(group, kind.name.capitalize())] += count
        acquired[group] += counts.acquired
        archived[group] += counts.archived
    for labels, count in sorted(by_ack.items()):
        acks.add_metric(list(labels), count)
    yield acks
    yield timeouts
    yield in_flight
    yield from _dead_letters(manager)
    for name, doc, totals in (
        ("acquiredrecords", "Records acquired by the group's consumers", acquired),
        ("archivedrecords", "Records archived (rejected, or at the delivery limit)", archived),
    ):
        family = CounterMetricFamily(OWN + name, doc, labels=["group"])
        for group, count in sorted(totals.items()):
            family.add_metric([group], count)
        yield family


def _dead_letters(manager: SharePartitionManager) -> Iterator[Metric]:
    counts = sorted(manager.dead_letters.counts.items())
    for name, doc, value in (
        ("deadletterqueuerecordcount", "Records written to the dead-letter topic", "records"),
        (
            "deadletterqueuetotalproducerequests",
            "Appends of dead-letter records tried",
            "produce_requests",
        ),
        (
            "deadletterqueuefailedproducerequests",
            "Dead-letter writes that failed in the end",
            "failed_produce_requests",
        ),
    ):
        family = CounterMetricFamily(GROUP + name, doc, labels=["group"])
        for group, group_counts in counts:
            family.add_metric([group], getattr(group_counts, value))
        yield family
