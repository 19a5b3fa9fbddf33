"""The leader's ISR decisions (sans-IO): expansion when a follower catches up, shrinking
for followers lagging past replica.lag.time.max.ms, and the maximal ISR while a change is
pending with the controller."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from partition_fixtures import batch, open_partition, state

from kafkalite.broker.partition import Partition

A, B, C = 1, 2, 3
LAG_MS = 30_000


def leader_of(tmp_path, isr: tuple[int, ...], replicas=(A, B, C)) -> Partition:
    leader = open_partition(tmp_path, broker_id=A)
    assert leader.make_leader(state(A, 0, replicas, isr), now_ms=0) is ErrorCode.none
    return leader


def test_a_follower_reaching_the_high_watermark_joins_the_isr_pending_the_controller(
    tmp_path,
) -> None:
    leader = leader_of(tmp_path, isr=(A,), replicas=(A, B))
    leader.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=0)
    assert leader.high_watermark == 3
    assert leader.record_follower_fetch(B, 2, now_ms=1) is False
    assert leader.maybe_expand_isr(B) is None  # behind the high watermark
    leader.record_follower_fetch(B, 3, now_ms=2)
    assert leader.maybe_expand_isr(B) == [A, B]
    assert (leader.isr, leader.maximal_isr, leader.pending_isr) == ([A], [A, B], [A, B])
    assert leader.maybe_expand_isr(B) is None  # one change in flight at a time
    # The controller's answer: same leader epoch, the next partition epoch.
    leader.make_leader(state(A, 0, (A, B), (A, B), partition_epoch=1), now_ms=3)
    assert (leader.isr, leader.pending_isr) == ([A, B], None)


def test_expansion_waits_for_the_start_of_the_leaders_epoch(tmp_path) -> None:
    leader = leader_of(tmp_path, isr=(A,), replicas=(A, B))
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    leader.make_leader(state(A, 1, (A, B), (A,)), now_ms=0)  # epoch 1 starts at offset 2
    leader.high_watermark = 1  # as if the high watermark were behind (just elected)
    leader.record_follower_fetch(B, 1, now_ms=1)
    assert leader.maybe_expand_isr(B) is None
    leader.record_follower_fetch(B, 2, now_ms=2)
    assert leader.maybe_expand_isr(B) == [A, B]


def test_a_follower_lagging_past_the_max_lag_leaves_the_isr(tmp_path) -> None:
    leader = leader_of(tmp_path, isr=(A, B, C))
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    leader.record_follower_fetch(B, 2, now_ms=1_000)  # B caught up at 1 s; C never fetched
    assert leader.out_of_sync_replicas(LAG_MS, LAG_MS) == []  # C: caught up at election (0)
    assert leader.maybe_shrink_isr(LAG_MS, LAG_MS) is None
    assert leader.out_of_sync_replicas(LAG_MS + 1, LAG_MS) == [C]
    assert leader.maybe_shrink_isr(LAG_MS + 1, LAG_MS) == [A, B]
    # Pending: the high watermark still counts C (the maximal ISR) until the controller agrees.
    assert leader.maximal_isr == [A, B, C]
    assert leader.high_watermark == 0
    leader.make_leader(state(A, 0, (A, B, C), (A, B), partition_epoch=1), now_ms=LAG_MS + 2)
    assert (leader.isr, leader.high_watermark) == ([A, B], 2)


def test_a_follower_at_the_log_end_never_lags(tmp_path) -> None:
    leader = leader_of(tmp_path, isr=(A, B), replicas=(A, B))
    leader.record_follower_fetch(B, 0, now_ms=1)
    assert leader.maybe_shrink_isr(10 * LAG_MS, LAG_MS) is None


def test_acks_all_refused_before_append_and_after_a_shrink(tmp_path) -> None:
    leader = leader_of(tmp_path, isr=(A, B), replicas=(A, B))
    leader.append_records_to_leader(batch(1), -1, min_isr=2, now_ms=0)
    assert leader.check_enough_replicas_reach_offset(1, min_isr=2) == (False, ErrorCode.none)
    leader.maybe_shrink_isr(LAG_MS + 1, LAG_MS)
    leader.make_leader(state(A, 0, (A, B), (A,), partition_epoch=1), now_ms=LAG_MS + 1)
    # The high watermark now covers it, but the ISR is below the minimum.
    assert leader.check_enough_replicas_reach_offset(1, min_isr=2) == (
        True,
        ErrorCode.not_enough_replicas_after_append,
    )
    refused = leader.append_records_to_leader(batch(1), -1, min_isr=2, now_ms=LAG_MS + 2)
    assert refused is ErrorCode.not_enough_replicas
    assert leader.log_end_offset == 1


def test_a_diverging_or_fenced_follower_fetch_is_not_recorded(tmp_path) -> None:
    leader = leader_of(tmp_path, isr=(A, B), replicas=(A, B))
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    leader.make_leader(state(A, 2, (A, B), (A, B)), now_ms=0)
    assert leader.record_follower_fetch(B, 2, current_leader_epoch=1, now_ms=1) is False
    assert leader.record_follower_fetch(B, 5, last_fetched_epoch=1, now_ms=1) is False
    assert leader.remote_replicas[B].log_end_offset == -1
    assert leader.record_follower_fetch(B, 2, last_fetched_epoch=0, now_ms=1) is True
    assert leader.high_watermark == 2
