"""Partition: high watermark from the ISR, acks=all checks, epoch fencing, bounded reads."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from partition_fixtures import LOCAL, batch, open_partition, state

from kafkalite.broker.partition import EARLIEST, LATEST, READ_COMMITTED
from kafkalite.storage.log import AppendResult


def test_single_node_high_watermark_follows_the_log_end(tmp_path) -> None:
    partition = open_partition(tmp_path)
    assert partition.make_leader(state(), now_ms=0) is ErrorCode.none
    result = partition.append_records_to_leader(batch(3), -1, min_isr=1, now_ms=0)
    assert isinstance(result, AppendResult)
    assert (partition.log_end_offset, partition.high_watermark) == (3, 3)


def test_high_watermark_is_the_smallest_log_end_of_the_isr(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2, 3), isr=(LOCAL, 2)), now_ms=0)
    partition.append_records_to_leader(batch(5), 1, min_isr=1, now_ms=0)
    assert partition.high_watermark == 0  # follower 2 has not fetched yet
    partition.update_follower_fetch_state(2, 3, now_ms=10)
    assert partition.high_watermark == 3
    partition.update_follower_fetch_state(2, 5, now_ms=20)
    assert partition.high_watermark == 5  # replica 3 is out of the ISR: it does not count
    partition.update_follower_fetch_state(2, 4, now_ms=30)
    assert partition.high_watermark == 5  # never lowered


def test_follower_fetch_state_records_position_and_caught_up_time(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL,)), now_ms=0)
    partition.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    partition.update_follower_fetch_state(2, 1, now_ms=100)
    follower = partition.remote_replicas[2]
    assert (follower.log_end_offset, follower.last_caught_up_time_ms) == (1, 0)
    partition.update_follower_fetch_state(2, 2, now_ms=200)
    assert (follower.log_end_offset, follower.last_caught_up_time_ms) == (2, 200)
    assert partition.update_follower_fetch_state(9, 2, now_ms=300) is False


def test_acks_all_refused_below_min_insync_replicas_before_appending(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL,)), now_ms=0)
    assert (
        partition.append_records_to_leader(batch(), -1, min_isr=2, now_ms=0)
        is ErrorCode.not_enough_replicas
    )
    assert partition.log_end_offset == 0
    assert isinstance(partition.append_records_to_leader(batch(), 1, 2, 0), AppendResult)


def test_min_insync_replicas_is_capped_at_the_replication_factor(tmp_path) -> None:
    # Kafka's effectiveMinIsr: a broker-wide min.insync.replicas=2 leaves one-replica topics
    # writable with acks=all.
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL,), isr=(LOCAL,)), now_ms=0)
    assert isinstance(partition.append_records_to_leader(batch(), -1, 2, 0), AppendResult)
    assert partition.check_enough_replicas_reach_offset(1, min_isr=2) == (True, ErrorCode.none)


def test_enough_replicas_reach_offset(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL, 2)), now_ms=0)
    partition.append_records_to_leader(batch(2), -1, min_isr=2, now_ms=0)
    assert partition.check_enough_replicas_reach_offset(2, 2) == (False, ErrorCode.none)
    partition.update_follower_fetch_state(2, 2, now_ms=1)
    assert partition.check_enough_replicas_reach_offset(2, 2) == (True, ErrorCode.none)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL,), partition_epoch=1), 2)
    assert partition.check_enough_replicas_reach_offset(2, 2) == (
        True,
        ErrorCode.not_enough_replicas_after_append,
    )


def test_stale_leader_and_follower_decisions_are_fenced(tmp_path) -> None:
    partition = open_partition(tmp_path)
    assert partition.make_leader(state(epoch=5, partition_epoch=3), 0) is ErrorCode.none
    assert partition.make_leader(state(epoch=4), 0) is ErrorCode.fenced_leader_epoch
    assert partition.make_follower(state(leader=2, epoch=4)) is ErrorCode.fenced_leader_epoch
    assert (
        partition.make_follower(state(leader=2, epoch=5, partition_epoch=2))
        is ErrorCode.fenced_leader_epoch
    )
    assert (partition.leader_id, partition.leader_epoch) == (LOCAL, 5)
    assert partition.make_follower(state(leader=2, epoch=6)) is ErrorCode.none
    assert (partition.leader_id, partition.is_leader) == (2, False)


def test_a_follower_refuses_leader_requests(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_follower(state(leader=2, replicas=(2, LOCAL), epoch=1))
    assert partition.append_records_to_leader(batch(), 1, 1, 0) is ErrorCode.not_leader_or_follower
    assert partition.fetch_records(0, 1000).error is ErrorCode.not_leader_or_follower
    assert partition.fetch_offset_for_timestamp(LATEST)[0] is ErrorCode.not_leader_or_follower
    assert partition.last_offset_for_leader_epoch(-1, 1)[0] is ErrorCode.not_leader_or_follower
    assert partition.delete_records_on_leader(0)[0] is ErrorCode.not_leader_or_follower


def test_client_leader_epoch_checked(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(epoch=3), 0)
    assert partition.fetch_records(0, 100, current_leader_epoch=2).error is (
        ErrorCode.fenced_leader_epoch
    )
    assert partition.fetch_records(0, 100, current_leader_epoch=4).error is (
        ErrorCode.unknown_leader_epoch
    )
    assert partition.fetch_records(0, 100, current_leader_epoch=3).error is ErrorCode.none


def test_consumers_read_to_the_high_watermark_followers_to_the_log_end(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL, 2)), now_ms=0)
    partition.append_records_to_leader(batch(4), 1, min_isr=1, now_ms=0)
    consumer = partition.fetch_records(0, 10_000)
    assert (consumer.error, consumer.records, consumer.high_watermark) == (ErrorCode.none, b"", 0)
    assert partition.fetch_records(0, 10_000, isolation_level=READ_COMMITTED).records == b""
    follower = partition.fetch_records(0, 10_000, replica_id=2)
    assert follower.records != b""
    assert partition.fetch_offset_for_timestamp(LATEST) == (ErrorCode.none, (0, -1, 0))
    partition.update_follower_fetch_state(2, 4, now_ms=6)
    assert partition.fetch_records(0, 10_000).records == follower.records
    assert partition.fetch_offset_for_timestamp(LATEST) == (ErrorCode.none, (4, -1, 0))


def test_a_new_leader_behind_its_epoch_start_does_not_answer_latest(tmp_path) -> None:
    # Kafka's fetchOffsetForTimestamp: until the high watermark reaches the offset where this
    # leader's epoch began, the old leader may have exposed more than this one knows.
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL, 2)), now_ms=0)
    partition.append_records_to_leader(batch(4), 1, min_isr=1, now_ms=0)
    partition.make_leader(state(epoch=1, replicas=(LOCAL, 2), isr=(LOCAL, 2)), now_ms=1)
    assert partition.fetch_offset_for_timestamp(LATEST) == (
        ErrorCode.offset_not_available,
        (-1, -1, -1),
    )
    assert partition.fetch_offset_for_timestamp(1_000) == (
        ErrorCode.offset_not_available,
        (-1, -1, -1),
    )
    assert partition.fetch_offset_for_timestamp(EARLIEST) == (ErrorCode.none, (0, -1, 0))
    assert partition.fetch_offset_for_timestamp(LATEST, from_client=False)[0] is ErrorCode.none
    partition.update_follower_fetch_state(2, 4, now_ms=2)
    assert partition.fetch_offset_for_timestamp(LATEST) == (ErrorCode.none, (4, -1, 1))


def test_fetch_from_a_broker_that_is_no_replica(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(), now_ms=0)
    assert partition.fetch_records(0, 100, replica_id=7).error is (ErrorCode.not_leader_or_follower)


def test_delete_records_stops_at_the_high_watermark(tmp_path) -> None:
    partition = open_partition(tmp_path)
    partition.make_leader(state(replicas=(LOCAL, 2), isr=(LOCAL, 2)), now_ms=0)
    partition.append_records_to_leader(batch(4), 1, min_isr=1, now_ms=0)
    partition.update_follower_fetch_state(2, 2, now_ms=1)
    assert partition.delete_records_on_leader(3) == (ErrorCode.offset_out_of_range, -1)
    assert partition.delete_records_on_leader(-1) == (ErrorCode.none, 2)
