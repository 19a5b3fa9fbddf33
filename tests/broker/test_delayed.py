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
from kafkalite.broker.partition import READ_COMMITTED, Partition
from kafkalite.storage.batch import TRANSACTIONAL_FLAG
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.log import LogConfig
from kafkalite.storage.records import encode_batch

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


class CountedFetch:
    """A DelayedFetch over one partition that counts its reads of the log."""

    def __init__(self, partition: Partition, params: FetchParams, fetch_offset: int) -> None:
        self.reads = 0
        info = FetchInfo(TOPIC, 0, fetch_offset, 1 << 20)

        def read() -> FetchRead:
            self.reads += 1
            result = partition.fetch_records(
                fetch_offset,
                info.max_bytes,
                replica_id=params.replica_id,
                isolation_level=params.isolation_level,
            )
            return FetchRead((result,))

        self.delayed = DelayedFetch(params, [info], read, {TP: partition}.get)


def leader(tmp_path, config: LogConfig | None = None) -> Partition:
    partition = open_partition(tmp_path, config)
    partition.make_leader(state(), now_ms=0)
    return partition


BATCH_SIZE = len(batch())


def test_fetch_counts_bytes_and_reads_only_on_completion(tmp_path) -> None:
    partition = leader(tmp_path)
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)
    params = FetchParams(max_wait_ms=500, min_bytes=2 * BATCH_SIZE + 1, max_bytes=1 << 20)
    fetch = CountedFetch(partition, params, 0)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    assert fetch.reads == 1  # the fetch's own read: one batch, short of min_bytes
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)
    assert purgatory.check_and_complete(TP) == 0  # 2 batches: one byte short
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)
    assert fetch.reads == 1  # retries count positions, they read nothing
    assert purgatory.check_and_complete(TP) == 1
    assert fetch.reads == 2  # the answer, read once on completion
    assert fetch.delayed.read_result.bytes_read == 3 * BATCH_SIZE


def test_consumer_fetch_counts_bytes_below_the_high_watermark_only(tmp_path) -> None:
    partition = replicated(tmp_path)  # 3 records, high watermark 0
    fetch = CountedFetch(partition, FetchParams(500, min_bytes=1, max_bytes=1 << 20), 0)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    partition.append_records_to_leader(batch(), -1, min_isr=2, now_ms=0)
    assert purgatory.check_and_complete(TP) == 0  # in the log, not below the high watermark
    partition.update_follower_fetch_state(2, 3, now_ms=1)
    assert purgatory.check_and_complete(TP) == 1
    assert fetch.reads == 2
    (result,) = fetch.delayed.read_result.results
    assert (result.high_watermark, result.records) == (3, partition.log.read(0, 1 << 20, 3))


def test_consumer_fetch_past_the_high_watermark_waits_for_it(tmp_path) -> None:
    """A fetch offset above the high watermark but in the log (a new leader's high watermark
    catching up) waits, as Kafka's case F does only across segments: answering it at the
    next append would send the client into a tight fetch loop."""
    partition = replicated(tmp_path)  # 3 records, high watermark 0
    fetch = CountedFetch(partition, FetchParams(500, min_bytes=1, max_bytes=1 << 20), 2)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    partition.append_records_to_leader(batch(), -1, min_isr=2, now_ms=0)
    assert purgatory.check_and_complete(TP) == 0
    partition.update_follower_fetch_state(2, 6, now_ms=1)  # the high watermark passes it
    assert purgatory.check_and_complete(TP) == 1
    assert fetch.reads == 2


def test_follower_fetch_counts_bytes_to_the_log_end(tmp_path) -> None:
    partition = replicated(tmp_path)
    params = FetchParams(500, min_bytes=1, max_bytes=1 << 20, replica_id=2)
    fetch = CountedFetch(partition, params, 3)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    partition.append_records_to_leader(batch(2), -1, min_isr=2, now_ms=0)
    assert purgatory.check_and_complete(TP) == 1  # the high watermark is still 0
    assert (fetch.reads, fetch.delayed.read_result.bytes_read) == (2, len(batch(2)))


def test_read_committed_fetch_counts_bytes_below_the_last_stable_offset_only(tmp_path) -> None:
    partition = leader(tmp_path)
    txn = encode_batch(
        [(None, b"t0")], timestamp=1_000, producer_id=7, producer_epoch=0, base_sequence=0,
        attributes=TRANSACTIONAL_FLAG,
    )  # fmt: skip
    partition.append_records_to_leader(txn, 1, min_isr=1, now_ms=0)  # open: stable offset 0
    params = FetchParams(500, min_bytes=1, max_bytes=1 << 20, isolation_level=READ_COMMITTED)
    fetch = CountedFetch(partition, params, 0)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)
    assert purgatory.check_and_complete(TP) == 0  # below the high watermark, not stable
    partition.append_txn_marker(7, 0, EndTxnMarker(True, 0), now_ms=0)
    assert partition.last_stable_offset == 3
    assert purgatory.check_and_complete(TP) == 1
    assert fetch.reads == 2


def test_fetch_answers_at_once_on_a_segment_roll(tmp_path) -> None:
    # Kafka's case F: a fetch offset on an older segment than the readable end completes.
    partition = leader(tmp_path, LogConfig(segment_bytes=BATCH_SIZE))
    fetch = CountedFetch(partition, FetchParams(500, min_bytes=1 << 20, max_bytes=1 << 20), 0)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)
    assert purgatory.check_and_complete(TP) == 0  # the first segment
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)  # rolls
    assert len(partition.log.segments) == 2
    assert purgatory.check_and_complete(TP) == 1
    assert (fetch.reads, fetch.delayed.read_result.bytes_read) == (2, BATCH_SIZE)


def test_fetch_answers_at_once_when_its_partition_moves_away(tmp_path) -> None:
    partition = leader(tmp_path)
    fetch = CountedFetch(partition, FetchParams(500, min_bytes=1, max_bytes=1 << 20), 0)
    purgatory = Purgatory("Fetch")
    assert purgatory.try_complete_else_watch(fetch.delayed) is False
    partition.make_follower(state(leader=2, epoch=1, replicas=(LOCAL, 2)))
    assert purgatory.check_and_complete(TP) == 1
    (result,) = fetch.delayed.read_result.results
    assert result.error is ErrorCode.not_leader_or_follower


def test_fetch_answers_at_once_on_an_error_or_without_wait(tmp_path) -> None:
    partition = leader(tmp_path)
    out_of_range = CountedFetch(partition, FetchParams(500, min_bytes=1, max_bytes=1000), 5)
    assert out_of_range.delayed.try_complete() is True
    assert out_of_range.delayed.read_result.results[0].error is ErrorCode.offset_out_of_range
    no_wait = CountedFetch(partition, FetchParams(0, min_bytes=1, max_bytes=1000), 0)
    assert no_wait.delayed.try_complete() is True
    assert (out_of_range.reads, no_wait.reads) == (1, 1)


def test_fetch_expiry_answers_what_there_is(tmp_path) -> None:
    partition = leader(tmp_path)
    fetch = CountedFetch(partition, FetchParams(500, min_bytes=1 << 20, max_bytes=1 << 20), 0)
    purgatory = Purgatory("Fetch")
    purgatory.try_complete_else_watch(fetch.delayed)
    partition.append_records_to_leader(batch(), 1, min_isr=1, now_ms=0)
    assert purgatory.check_and_complete(TP) == 0
    assert purgatory.expire(fetch.delayed) is True
    assert (fetch.reads, fetch.delayed.read_result.bytes_read) == (2, BATCH_SIZE)
