"""The transaction marker sender's decisions (sans-IO): markers routed to each partition's
current leader, one WriteTxnMarkers request per broker (one transaction per producer id in
a request), and each partition's answer as Kafka's TransactionMarkerRequestCompletionHandler
takes it (retry, cancel, drop). The sender on real processes: tests/cluster/
test_cluster_transactions.py."""

from __future__ import annotations

from typing import Any

from cluster_fixtures import SharedCluster
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.txn_marker_sender import (
    PendingMarkers,
    _one_txn_per_producer,
    apply_response,
    route,
    write_txn_markers_request,
)
from kafkalite.protocol.entities import make
from kafkalite.txn.coordinator import MarkerJob


def pending(tid: str, pid: int, partitions: set[tuple[str, int]]) -> PendingMarkers:
    job = MarkerJob(tid, pid, 3, True, frozenset(partitions))
    return PendingMarkers(job, coordinator_epoch=5, remaining=set(partitions))


def response(errors: dict[int, dict[tuple[str, int], ErrorCode]]) -> Any:
    module: Any = load_payload_module(27, 1, EntityType.response)
    markers = []
    for pid, by_tp in errors.items():
        topics = {}
        for (topic, index), error in by_tp.items():
            result = make(
                module.WritableTxnMarkerPartitionResult, partition_index=index, error_code=error
            )
            topics.setdefault(topic, []).append(result)
        markers.append(
            make(
                module.WritableTxnMarkerResult,
                producer_id=pid,
                topics=tuple(
                    make(module.WritableTxnMarkerTopicResult, name=t, partitions=tuple(p))
                    for t, p in topics.items()
                ),
            )
        )
    return make(module.WriteTxnMarkersResponse, markers=tuple(markers))


def test_markers_are_routed_to_current_leaders() -> None:
    cluster = SharedCluster()
    cluster.create_topic("t", [[1, 2], [2, 1], [3, 1]])
    cluster.elect("t", 2, -1, (3,))  # no leader now
    metadata = cluster.view(1)
    a = pending("a", 10, {("t", 0), ("t", 1), ("t", 2), ("gone", 0)})
    # t-2 has no leader now: it waits for the next round.
    assert dict(route([a], metadata)) == {1: [(a, ("t", 0))], 2: [(a, ("t", 1))]}
    assert a.remaining == {("t", 0), ("t", 1), ("t", 2)}  # a deleted topic needs no marker


def test_one_request_per_broker_names_each_transaction_once() -> None:
    a = pending("a", 10, {("t", 0), ("t", 1), ("u", 0)})
    b = pending("b", 11, {("t", 0)})
    again = pending("a2", 10, {("t", 1)})  # the same producer id: a request of its own
    entries = [(a, ("t", 0)), (a, ("t", 1)), (a, ("u", 0)), (b, ("t", 0)), (again, ("t", 1))]
    batches = _one_txn_per_producer(entries)
    assert batches == [entries[:4], entries[4:]]
    request = write_txn_markers_request(batches[0])
    assert [
        (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch)
        for m in request.markers
    ] == [(10, 3, True, 5), (11, 3, True, 5)]
    assert [(t.name, t.partition_indexes) for t in request.markers[0].topics] == [
        ("t", (0, 1)),
        ("u", (0,)),
    ]


def test_answers_remove_retry_or_cancel() -> None:
    a = pending("a", 10, {("t", 0), ("t", 1), ("t", 2), ("t", 3)})
    b = pending("b", 11, {("t", 0)})
    entries = [(a, ("t", i)) for i in range(4)] + [(b, ("t", 0))]
    apply_response(
        entries,
        response(
            {
                10: {
                    ("t", 0): ErrorCode.none,
                    ("t", 1): ErrorCode.not_leader_or_follower,
                    ("t", 2): ErrorCode.not_enough_replicas_after_append,
                    ("t", 3): ErrorCode.unsupported_for_message_format,
                },
                11: {("t", 0): ErrorCode.transaction_coordinator_fenced},
            }
        ),
    )
    assert a.remaining == {("t", 1), ("t", 2)} and not a.cancelled and not a.done
    assert b.cancelled and not b.done
    apply_response(
        [(a, ("t", 1)), (a, ("t", 2))],
        response({10: {("t", 1): ErrorCode.none, ("t", 2): ErrorCode.none}}),
    )
    assert a.done
