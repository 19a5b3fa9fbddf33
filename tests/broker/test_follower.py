"""The follower side of Partition: the leader's batches appended unchanged, the high watermark
learnt from the leader, truncation by leader epoch after a leader change."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from partition_fixtures import batch, open_partition, state

from kafkalite.broker.partition import Partition
from kafkalite.storage.batch import TRANSACTIONAL_FLAG
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.errors import UnexpectedAppendOffsetError
from kafkalite.storage.log import AppendResult, LogConfig, UnifiedLog
from kafkalite.storage.records import encode_batch
from kafkalite.storage.txn_index import AbortedTxn

A, B = 1, 2
BOTH = (A, B)


def pair(tmp_path) -> tuple[Partition, Partition]:
    """A leads epoch 0 with B in the ISR."""
    leader = open_partition(tmp_path, broker_id=A)
    follower = open_partition(tmp_path, broker_id=B)
    assert leader.make_leader(state(A, 0, BOTH), now_ms=0) is ErrorCode.none
    assert follower.make_follower(state(A, 0, BOTH)) is ErrorCode.none
    return leader, follower


def replicate(leader: Partition, follower: Partition, now_ms: int = 1) -> None:
    """One fetch round of the follower (Kafka's ReplicaFetcherThread, without the network):
    the leader records its position, then reads (as ReplicaManager.fetch_messages does)."""
    replica_id, offset = follower.local_broker_id, follower.log_end_offset
    leader.record_follower_fetch(replica_id, offset, now_ms=now_ms)
    read = leader.fetch_records(offset, 1 << 20, replica_id=replica_id)
    assert read.error is ErrorCode.none
    if read.records:
        assert follower.append_records_to_follower(read.records, now_ms) is ErrorCode.none
    follower.update_follower_high_watermark(read.high_watermark)


def log_bytes(partition: Partition) -> bytes:
    return partition.log.read(0, 1 << 20, partition.log_end_offset)


def test_follower_appends_the_leaders_batches_unchanged(tmp_path) -> None:
    leader, follower = pair(tmp_path)
    leader.append_records_to_leader(batch(3), -1, min_isr=2, now_ms=0)
    leader.append_records_to_leader(batch(2), -1, min_isr=2, now_ms=0)
    replicate(leader, follower)
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.log.leader_epoch_cache.entries == leader.log.leader_epoch_cache.entries
    assert (leader.high_watermark, follower.high_watermark) == (0, 0)
    replicate(leader, follower)  # the next fetch tells the leader B has everything
    assert (leader.high_watermark, follower.high_watermark) == (5, 5)


def test_follower_refuses_batches_below_its_log_end(tmp_path) -> None:
    leader, follower = pair(tmp_path)
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    records = leader.fetch_records(0, 1 << 20, replica_id=B).records
    assert follower.append_records_to_follower(records, 1) is ErrorCode.none
    refused = follower.append_records_to_follower(records, 2)
    assert isinstance(refused, UnexpectedAppendOffsetError)
    assert follower.log_end_offset == 2
    assert leader.append_records_to_follower(records, 2) is ErrorCode.not_leader_or_follower


def test_a_follower_turned_leader_still_deduplicates_retries(tmp_path) -> None:
    leader, follower = pair(tmp_path)
    idempotent = batch(2, producer_id=7, base_sequence=0)
    leader.append_records_to_leader(idempotent, -1, min_isr=2, now_ms=0)
    replicate(leader, follower)
    assert follower.make_leader(state(B, 1, BOTH), now_ms=5) is ErrorCode.none
    retried = follower.append_records_to_leader(idempotent, 1, min_isr=1, now_ms=6)
    assert isinstance(retried, AppendResult)
    assert (retried.duplicate, retried.first_offset, follower.log_end_offset) == (True, 0, 2)


def test_a_follower_indexes_the_leaders_aborted_transactions(tmp_path) -> None:
    """A follower turned leader must answer read_committed fetches with the aborted
    transactions the old leader wrote markers for; without them the aborted records read as
    committed (3-broker transactional chaos run, seed 43: an abort with the epoch bumped by
    InitProducerId, replicated, then the follower elected)."""
    leader, follower = pair(tmp_path)
    txn = encode_batch(
        [(None, b"t0"), (None, b"t1")], timestamp=1_000, producer_id=7, producer_epoch=0,
        base_sequence=0, attributes=TRANSACTIONAL_FLAG,
    )  # fmt: skip
    leader.append_records_to_leader(txn, -1, min_isr=2, now_ms=0)
    assert leader.append_txn_marker(7, 1, EndTxnMarker(False, 3), now_ms=0) == 2
    leader.append_records_to_leader(batch(1), -1, min_isr=2, now_ms=0)
    replicate(leader, follower)
    aborted = [AbortedTxn(producer_id=7, first_offset=0, last_offset=2, last_stable_offset=3)]
    assert leader.log.collect_aborted(0, 4) == aborted
    assert follower.log.collect_aborted(0, 4) == aborted
    assert follower.make_leader(state(B, 1, BOTH), now_ms=5) is ErrorCode.none
    assert follower.log.collect_aborted(0, 4) == aborted


def test_old_leader_truncates_to_where_the_new_leaders_epoch_starts(tmp_path) -> None:
    old, new = pair(tmp_path)
    old.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=0)
    replicate(old, new)
    old.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)  # offsets 3-4: never copied
    # B is elected in epoch 1 and writes offset 3; A comes back as its follower in epoch 2.
    assert new.make_leader(state(B, 1, BOTH), now_ms=10) is ErrorCode.none
    new.append_records_to_leader(batch(1), 1, min_isr=1, now_ms=10)
    assert new.make_leader(state(B, 2, BOTH), now_ms=20) is ErrorCode.none
    assert old.make_follower(state(B, 2, BOTH)) is ErrorCode.none
    # A asks the leader where A's latest epoch (0) ends there: at 3, where epoch 1 starts.
    error, epoch, end = new.last_offset_for_leader_epoch(
        -1, old.log.leader_epoch_cache.latest_epoch
    )
    assert (error, epoch, end) == (ErrorCode.none, 0, 3)
    assert old.truncation_offset(epoch, end) == (3, True)
    old.truncate_to(3)
    replicate(new, old)
    assert log_bytes(old) == log_bytes(new)
    assert old.log_end_offset == 4


def test_truncation_asks_again_when_the_follower_never_had_the_leaders_epoch(tmp_path) -> None:
    partition = open_partition(tmp_path, broker_id=B)
    partition.make_leader(state(B, 0, (B,)), now_ms=0)
    partition.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)  # epoch 0: 0-1
    partition.make_leader(state(B, 2, (B,)), now_ms=1)
    partition.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=1)  # epoch 2: 2-3
    partition.make_follower(state(A, 3, (A, B)))
    # The leader's largest epoch <= 2 is 1, which B never had: cut to B's epoch 0 end, ask again.
    assert partition.truncation_offset(1, 10) == (2, False)
    assert partition.truncation_offset(0, 1) == (1, True)  # the leader's epoch 0 ends sooner
    assert partition.truncation_offset(-1, 3) == (3, True)  # a leader without that epoch


@pytest.mark.parametrize(("leader_hw", "expected"), [(1, 1), (9, 2)])
def test_follower_high_watermark_never_passes_its_log_end(tmp_path, leader_hw, expected) -> None:
    leader, follower = pair(tmp_path)
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    replicate(leader, follower)
    follower.update_follower_high_watermark(leader_hw)
    assert follower.high_watermark == expected


def test_fetch_from_a_diverged_follower_answers_the_diverging_epoch(tmp_path) -> None:
    leader, follower = pair(tmp_path)
    leader.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=0)  # epoch 0: 0-2
    leader.make_leader(state(A, 2, BOTH), now_ms=1)
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=1)  # epoch 2: 3-4
    # The follower ends at 4 in epoch 1, which this leader never had: epoch 0 ended at 3.
    assert leader.record_follower_fetch(B, 4, last_fetched_epoch=1, now_ms=2) is False
    assert leader.remote_replicas[B].log_end_offset == -1  # its position is not taken
    diverged = leader.fetch_records(4, 1 << 20, replica_id=B, last_fetched_epoch=1)
    assert (diverged.error, diverged.records, diverged.diverging_epoch) == (
        ErrorCode.none,
        b"",
        (0, 3),
    )
    leader.record_follower_fetch(B, 3, last_fetched_epoch=0, now_ms=3)
    assert leader.remote_replicas[B].log_end_offset == 3
    consistent = leader.fetch_records(3, 1 << 20, replica_id=B, last_fetched_epoch=0)
    assert consistent.diverging_epoch is None and consistent.records


def reopened(partition: Partition, *, crash: bool) -> Partition:
    """The replica after a restart: a clean stop snapshots producer state at the log end; a
    crash leaves only older snapshots (or none) and unflushed batches to recover."""
    log = partition.log
    if crash:
        recovery_point = log.recovery_point
    else:
        log.close()
        recovery_point = log.log_end_offset
    again = UnifiedLog.open(log.dir, log.config, recovery_point=recovery_point, now_ms=3)
    return Partition(partition.topic, partition.topic_id, 0, again, partition.local_broker_id)


@pytest.mark.parametrize("restart", ["none", "clean", "crash", "crash without snapshots"])
@pytest.mark.parametrize("segment_bytes", [LogConfig().segment_bytes, 200])
def test_a_retry_reaching_the_new_leader_is_answered_as_a_duplicate(
    tmp_path, restart, segment_bytes
) -> None:
    """Issue 13 point 4 (chaos seed 12): the leader wrote an idempotent batch, its follower
    copied it (beyond the follower's high watermark, never acknowledged), the leader died;
    the follower, maybe restarted meanwhile, is elected and gets the producer's retry: it
    answers the original offsets and writes nothing (Kafka's ProducerStateManager, filled by
    appendAsFollower). With 200-byte segments the log rolls and snapshots along the way."""
    config = LogConfig(segment_bytes=segment_bytes)
    leader = open_partition(tmp_path, config, broker_id=A)
    follower = open_partition(tmp_path, config, broker_id=B)
    leader.make_leader(state(A, 0, BOTH), now_ms=0)
    follower.make_follower(state(A, 0, BOTH))
    for sequence in range(0, 8, 2):
        leader.append_records_to_leader(batch(2, 7, sequence), -1, min_isr=2, now_ms=0)
        replicate(leader, follower)
    retried = batch(2, producer_id=7, base_sequence=8)
    leader.append_records_to_leader(retried, -1, min_isr=2, now_ms=0)
    replicate(leader, follower)  # offsets 8-9 copied; the high watermark there is still 8
    assert (follower.log_end_offset, follower.high_watermark) == (10, 8)
    if restart != "none":
        if restart == "crash without snapshots":
            for snapshot in follower.log.dir.glob("*.snapshot"):
                snapshot.unlink()
        follower = reopened(follower, crash=restart != "clean")
        assert follower.make_follower(state(A, 0, BOTH)) is ErrorCode.none
    assert follower.make_leader(state(B, 1, BOTH), now_ms=5) is ErrorCode.none
    answer = follower.append_records_to_leader(retried, -1, min_isr=1, now_ms=6)
    assert isinstance(answer, AppendResult)
    assert (answer.duplicate, answer.first_offset, answer.last_offset) == (True, 8, 9)
    assert follower.log_end_offset == 10
    # The next batch continues the sequence; a gap is still refused.
    following = follower.append_records_to_leader(batch(1, 7, 10), -1, min_isr=1, now_ms=7)
    assert isinstance(following, AppendResult) and following.first_offset == 10
