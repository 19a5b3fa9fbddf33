"""Delayed operations keyed by partition: parked, completed by their partition, expired."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from partition_fixtures import LOCAL, TOPIC, batch, open_partition, state

from kafkalite.broker.delayed import (
    DelayedFetch,
    DelayedProduce,
    FetchInfo,
    FetchParams,
    FetchRead,
    ProducePartitionStatus,
    ProduceResult,
    Purgatory,
)
from kafkalite.broker.partition import LogReadResult, Partition

TP = (TOPIC, 0)


def parked_produce(partition: Partition, required_offset: int, min_isr: int = 2) -> DelayedProduce:
    status = ProducePartitionStatus(required_offset, ProduceResult(base_offset=0))
    return DelayedProduce({TP: status}, {TP: partition}.get, lambda _tp: min_isr)


def replicated(tmp_path) -> Partition:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL, 2)), now_ms=0)
    partition.append_records_to_leader(batch(3), -1, min_isr=2, now_ms=0)
    return partition


def test_produce_waits_for_the_high_watermark_of_its_partition(tmp_path) -> None:
    partition = replicated(tmp_path)
    purgatory = Purgatory("Produce")
    delayed = parked_produce(partition, 3)
    assert purgatory.try_complete_else_watch(delayed) is False
    assert purgatory.watched(TP) == 1
    assert purgatory.check_and_complete(("other", 0)) == 0
    partition.update_follower_fetch_state(2, 2, now_ms=1)
    assert purgatory.check_and_complete(TP) == 0  # HW 2 < 3
    partition.update_follower_fetch_state(2, 3, now_ms=2)
    assert purgatory.check_and_complete(TP) == 1
    assert delayed.completed and purgatory.watched() == 0
    assert delayed.results[TP] == ProduceResult(ErrorCode.none, base_offset=0)


def test_produce_expires_with_request_timed_out(tmp_path) -> None:
    partition = replicated(tmp_path)
    purgatory = Purgatory("Produce")
    delayed = parked_produce(partition, 3)
    purgatory.try_complete_else_watch(delayed)
    assert purgatory.expire(delayed) is True
    assert delayed.results[TP].error is ErrorCode.request_timed_out
    assert purgatory.watched() == 0
    assert purgatory.expire(delayed) is False  # completes once


def test_produce_after_the_isr_shrank_below_the_minimum(tmp_path) -> None:
    partition = replicated(tmp_path)
    purgatory = Purgatory("Produce")
    delayed = parked_produce(partition, 3)
    purgatory.try_complete_else_watch(delayed)
    # The follower dropped out of the ISR: HW = the leader's LEO, but too few replicas.
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL,), partition_epoch=1), 5)
    assert purgatory.check_and_complete(TP) == 1
    assert delayed.results[TP].error is ErrorCode.not_enough_replicas_after_append


def test_produce_to_a_partition_that_lost_leadership(tmp_path) -> None:
    partition = replicated(tmp_path)
    delayed = parked_produce(partition, 3)
    partition.make_follower(state(leader=2, epoch=1, replicas=(LOCAL, 2)))
    assert delayed.try_complete() is True
    assert delayed.results[TP].error is ErrorCode.not_leader_or_follower


def test_fetch_completes_once_min_bytes_arrive() -> None:
    reads = [FetchRead((LogReadResult(ErrorCode.none, b""),))]
    info = FetchInfo(TOPIC, 0, 0, 1000)
    params = FetchParams(max_wait_ms=500, min_bytes=3, max_bytes=1000)
    delayed = DelayedFetch(params, [info], lambda: reads[-1])
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(delayed) is False
    reads.append(FetchRead((LogReadResult(ErrorCode.none, b"ab"),)))
    assert purgatory.check_and_complete(TP) == 0
    reads.append(FetchRead((LogReadResult(ErrorCode.none, b"abc"),)))
    assert purgatory.check_and_complete(TP) == 1
    assert delayed.read_result.bytes_read == 3


def test_fetch_answers_at_once_on_an_error_or_without_wait() -> None:
    info = FetchInfo(TOPIC, 0, 0, 1000)
    failed = FetchRead((LogReadResult(ErrorCode.offset_out_of_range),))
    params = FetchParams(max_wait_ms=500, min_bytes=1, max_bytes=1000)
    assert DelayedFetch(params, [info], lambda: failed).try_complete() is True
    empty = FetchRead((LogReadResult(ErrorCode.none),))
    no_wait = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1000)
    assert DelayedFetch(no_wait, [info], lambda: empty).try_complete() is True


def test_fetch_expiry_answers_what_there_is() -> None:
    reads = [FetchRead((LogReadResult(ErrorCode.none),))]
    params = FetchParams(max_wait_ms=500, min_bytes=10, max_bytes=1000)
    delayed = DelayedFetch(params, [FetchInfo(TOPIC, 0, 0, 1000)], lambda: reads[-1])
    purgatory = Purgatory("Fetch")
    purgatory.try_complete_else_watch(delayed)
    reads.append(FetchRead((LogReadResult(ErrorCode.none, b"x"),)))
    assert purgatory.expire(delayed) is True
    assert delayed.read_result.bytes_read == 1
