"""DeleteRecords on a replicated partition (sans-IO, Kafka's DelayedDeleteRecords): the answer
waits for the log start the followers on live brokers report in their fetches; a dead broker's
replica is not waited for; expiry answers REQUEST_TIMED_OUT with low watermark -1."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from partition_fixtures import batch, open_partition, state

from kafkalite.broker.delayed import DelayedDeleteRecords, DeleteRecordsStatus, Purgatory

A, B, C = 1, 2, 3
TP = ("t", 0)


def replicated(tmp_path):
    leader = open_partition(tmp_path, broker_id=A)
    assert leader.make_leader(state(A, 0, (A, B, C), (A, B, C)), now_ms=0) is ErrorCode.none
    leader.append_records_to_leader(batch(10), 1, min_isr=1, now_ms=0)
    for follower in (B, C):
        leader.record_follower_fetch(follower, 10, now_ms=1, log_start_offset=0)
    assert leader.delete_records_on_leader(6) == (ErrorCode.none, 6)
    return leader


def delayed(leader, alive):
    status = DeleteRecordsStatus(required_offset=6)
    return DelayedDeleteRecords({TP: status}, lambda tp: leader, lambda: alive), status


def test_the_answer_waits_for_every_live_follower(tmp_path) -> None:
    leader = replicated(tmp_path)
    purgatory = Purgatory("DeleteRecords")
    operation, status = delayed(leader, {A, B, C})
    assert purgatory.try_complete_else_watch(operation) is False
    leader.record_follower_fetch(B, 10, now_ms=2, log_start_offset=6)
    assert purgatory.check_and_complete(TP) == 0
    leader.record_follower_fetch(C, 10, now_ms=2, log_start_offset=6)
    assert purgatory.check_and_complete(TP) == 1
    assert (status.error, status.low_watermark) == (ErrorCode.none, 6)


def test_a_dead_brokers_replica_is_not_waited_for(tmp_path) -> None:
    leader = replicated(tmp_path)
    leader.record_follower_fetch(B, 10, now_ms=2, log_start_offset=6)
    operation, status = delayed(leader, {A, B})
    assert Purgatory("DeleteRecords").try_complete_else_watch(operation) is True
    assert (status.error, status.low_watermark) == (ErrorCode.none, 6)


def test_expiry_answers_request_timed_out(tmp_path) -> None:
    leader = replicated(tmp_path)
    purgatory = Purgatory("DeleteRecords")
    operation, status = delayed(leader, {A, B, C})
    assert purgatory.try_complete_else_watch(operation) is False
    assert purgatory.expire(operation) is True
    assert (status.error, status.low_watermark) == (ErrorCode.request_timed_out, -1)
    assert purgatory.watched() == 0


def test_a_follower_follows_the_leaders_log_start_up_to_its_high_watermark(tmp_path) -> None:
    follower = open_partition(tmp_path, broker_id=B)
    assert follower.make_follower(state(A, 0, (A, B), (A, B))) is ErrorCode.none
    follower.append_records_to_follower(batch(10), now_ms=0)
    follower.update_follower_high_watermark(4)
    follower.maybe_increment_log_start_offset(6)
    assert follower.log_start_offset == 4
    follower.update_follower_high_watermark(10)
    follower.maybe_increment_log_start_offset(6)
    assert follower.log_start_offset == 6
