"""The sans-IO share-partition (KIP-932): acquisition, acknowledgement, locks, delivery
counts, the in-flight limit, and the state it persists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kafkalite.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from kafkalite.share.share_records import ShareState, ShareUpdate, apply_update

LOCK_MS = 1000
CONFIG = SharePartitionConfig(
    lock_duration_ms=LOCK_MS, delivery_count_limit=3, max_in_flight_records=100
)
ACCEPT, RELEASE, REJECT, GAP, RENEW = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
    AcknowledgeType.RENEW,
)


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(first, last) for first, last in ranges]


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(types))


def fresh(start: int = 0, config: SharePartitionConfig = CONFIG) -> SharePartition:
    return SharePartition(config, start)


def test_acquire_whole_batches_up_to_max_records() -> None:
    share = fresh()
    got = share.acquire("m1", batches((0, 4), (5, 9), (10, 14)), max_records=6, now_ms=0)
    # Batch-optimized: the second batch is finished although it passes max_records.
    assert got == [AcquiredRecords(0, 9, 1)]
    assert share.end_offset == 10
    assert share.next_fetch_offset() == 10
    assert share.acquired_by("m1") == list(range(10))


def test_record_limit_mode_stops_inside_a_batch() -> None:
    share = fresh()
    got = share.acquire("m1", batches((0, 4), (5, 9)), 3, 0, record_limit=True)
    assert got == [AcquiredRecords(0, 2, 1)]
    assert share.end_offset == 3
    assert share.acquire("m2", batches((0, 4), (5, 9)), 3, 0, record_limit=True) == [
        AcquiredRecords(3, 5, 1)
    ]


def test_a_second_member_gets_what_the_first_does_not_hold() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 4)), 5, 0)
    assert share.acquire("m2", batches((0, 4), (5, 9)), 100, 0) == [AcquiredRecords(5, 9, 1)]


@pytest.mark.parametrize(
    ("kind", "state", "start", "count"),
    [
        (ACCEPT, None, 1, 1),  # acknowledged: the start moves past it
        (REJECT, None, 1, 1),  # archived: likewise
        (GAP, None, 1, 1),
        (RELEASE, RecordState.AVAILABLE, 0, 1),
        (RENEW, RecordState.ACQUIRED, 0, 1),
    ],
)
def test_acknowledge_one_record(
    kind: AcknowledgeType, state: RecordState | None, start: int, count: int
) -> None:
    share = fresh()
    share.acquire("m1", batches((0, 0)), 1, 0)
    assert share.acknowledge("m1", [ack(0, 0, kind)], now_ms=10) is ErrorCode.none
    assert share.start_offset == start
    if state is not None:
        assert share.records[0].state is state
        assert share.records[0].delivery_count == count


def test_release_redelivers_with_the_next_delivery_count() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 2)), 10, 0)
    assert share.acknowledge("m1", [ack(0, 2, ACCEPT, RELEASE, ACCEPT)], 0) is ErrorCode.none
    assert share.next_fetch_offset() == 1
    assert share.acquire("m2", batches((0, 2)), 10, 0) == [AcquiredRecords(1, 1, 2)]


def test_archived_at_the_delivery_count_limit() -> None:
    share = fresh()
    for delivery in range(1, CONFIG.delivery_count_limit + 1):
        assert share.acquire("m1", batches((0, 0)), 1, 0) == [AcquiredRecords(0, 0, delivery)]
        assert share.acknowledge("m1", [ack(0, 0, RELEASE)], 0) is ErrorCode.none
    assert share.start_offset == 1  # archived on the last release
    assert share.acquire("m1", batches((0, 0)), 1, 0) == []


def test_lock_expiry_releases_and_counts_towards_the_limit() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 1)), 10, now_ms=0)
    assert share.next_lock_deadline() == LOCK_MS
    assert share.expire_locks(LOCK_MS - 1) == 0
    assert share.expire_locks(LOCK_MS) == 2
    assert share.acquire("m2", batches((0, 1)), 10, LOCK_MS) == [AcquiredRecords(0, 1, 2)]
    # The expired holder can no longer acknowledge.
    assert share.acknowledge("m1", [ack(0, 1, ACCEPT)], LOCK_MS) is ErrorCode.invalid_record_state


def test_counts_for_the_metrics() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 5)), 10, now_ms=0)  # 6 acquired
    acks = [ack(0, 0, ACCEPT), ack(1, 1, RELEASE), ack(2, 2, REJECT), ack(3, 3, RENEW)]
    assert share.acknowledge("m1", acks, LOCK_MS // 2) is ErrorCode.none
    assert share.expire_locks(LOCK_MS) == 2  # offsets 4 and 5; 3's renewed lock lasts longer
    share.acquire("m2", batches((1, 1)), 1, now_ms=LOCK_MS)  # the released one, again
    counts = share.counts
    assert counts.acquired == 7
    assert counts.acknowledgements == {ACCEPT: 1, RELEASE: 1, REJECT: 1, RENEW: 1}
    assert (counts.archived, counts.lock_timeouts) == (1, 2)


def test_renew_extends_the_lock() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 0)), 1, now_ms=0)
    share.acknowledge("m1", [ack(0, 0, RENEW)], now_ms=900)
    assert share.expire_locks(LOCK_MS) == 0
    assert share.next_lock_deadline() == 900 + LOCK_MS


@pytest.mark.parametrize(
    ("batch", "error"),
    [
        (ack(0, 1, ACCEPT), ErrorCode.none),
        (ack(0, 1, ACCEPT, REJECT), ErrorCode.none),
        (ack(0, 1, ACCEPT, REJECT, ACCEPT), ErrorCode.invalid_request),  # 3 types, 2 offsets
        (ack(1, 0, ACCEPT), ErrorCode.invalid_request),
        (ack(0, 0, 9), ErrorCode.invalid_request),
        (ack(0, 2, ACCEPT), ErrorCode.invalid_record_state),  # 2 was never acquired
    ],
)
def test_acknowledgements_are_validated_all_or_nothing(
    batch: AcknowledgementBatch, error: ErrorCode
) -> None:
    share = fresh()
    share.acquire("m1", batches((0, 1)), 10, 0)
    assert share.acknowledge("m1", [batch], 0) is error
    if error is not ErrorCode.none:
        assert share.acquired_by("m1") == [0, 1]  # nothing applied


def test_another_members_records_cannot_be_acknowledged() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 0)), 1, 0)
    assert share.acknowledge("m2", [ack(0, 0, ACCEPT)], 0) is ErrorCode.invalid_record_state


def test_member_release_frees_only_its_records() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 1)), 2, 0)
    share.acquire("m2", batches((2, 3)), 2, 0)
    assert share.release_member("m1") == 2
    assert share.acquired_by("m2") == [2, 3]
    assert share.next_fetch_offset() == 0


def test_in_flight_limit_stops_new_records_at_a_batch_boundary() -> None:
    config = SharePartitionConfig(LOCK_MS, 3, max_in_flight_records=4)
    share = fresh(config=config)
    assert share.acquire("m1", batches((0, 2), (3, 5), (6, 8)), 100, 0) == [
        AcquiredRecords(0, 5, 1)
    ]
    assert not share.can_acquire(readable_end=9)
    share.acknowledge("m1", [ack(0, 5, ACCEPT)], 0)
    assert share.can_acquire(readable_end=9)


def test_skipped_batches_and_gaps_are_archived_undelivered() -> None:
    share = fresh()
    fetched = [FetchedBatch(0, 1), FetchedBatch(2, 2, skip=True), FetchedBatch(5, 6)]
    assert share.acquire("m1", fetched, 100, 0) == [
        AcquiredRecords(0, 1, 1),
        AcquiredRecords(5, 6, 1),
    ]
    assert [share.records[o].state for o in (2, 3, 4)] == [RecordState.ARCHIVED] * 3


def test_log_start_moving_past_records_drops_them() -> None:
    share = fresh()
    share.acquire("m1", batches((0, 4)), 10, 0)
    share.move_start(3)
    assert share.start_offset == 3
    assert share.acquired_by("m1") == [3, 4]


def test_state_batches_round_trip() -> None:
    share = fresh(start=10)
    share.acquire("m1", batches((10, 15)), 10, 0)
    share.acknowledge("m1", [ack(10, 15, ACCEPT, RELEASE, REJECT, ACCEPT, ACCEPT, RELEASE)], 0)
    share.acquire("m1", batches((11, 11)), 10, 0)  # held: stored as available
    stored = share.state_batches()
    assert stored == [
        StateBatch(11, 11, RecordState.AVAILABLE, 2),
        StateBatch(12, 12, RecordState.ARCHIVED, 1),
        StateBatch(13, 14, RecordState.ACKNOWLEDGED, 1),
        StateBatch(15, 15, RecordState.AVAILABLE, 1),
    ]
    loaded = SharePartition.from_state(CONFIG, share.start_offset, stored)
    assert loaded.start_offset == 11
    assert loaded.end_offset == 16
    assert loaded.acquire("m2", batches((10, 15)), 10, 0) == [
        AcquiredRecords(11, 11, 3),
        AcquiredRecords(15, 15, 2),
    ]


# -- properties: whatever members do, a record is acknowledged at most once, and an
# acknowledged record is never acquired again.

_ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "ack", "expire", "leave"]),
        st.sampled_from(["m1", "m2", "m3"]),
        st.sampled_from(list(AcknowledgeType)),
        st.integers(0, 3),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_nothing_acknowledged_is_delivered_again(ops: list) -> None:
    share = fresh(config=SharePartitionConfig(LOCK_MS, 3, max_in_flight_records=100))
    log_end, now = 20, 0
    acknowledged: set[int] = set()
    deliveries: dict[int, int] = {}
    persisted = ShareState(0, 0, 0, 0, ())
    for op, member, kind, step in ops:
        now += step * 400
        if op == "acquire":
            fetched = [
                FetchedBatch(o, min(o + 1, log_end - 1))
                for o in range(share.next_fetch_offset(), log_end, 2)
            ]
            for run in share.acquire(member, fetched, 3, now):
                for offset in range(run.first_offset, run.last_offset + 1):
                    assert offset not in acknowledged
                    deliveries[offset] = deliveries.get(offset, 0) + 1
                    assert run.delivery_count == deliveries[offset]
                    assert deliveries[offset] <= 3
        elif op == "ack":
            held = share.acquired_by(member)
            if held:
                offset = held[0]
                assert share.acknowledge(member, [ack(offset, offset, kind)], now) is ErrorCode.none
                if kind is AcknowledgeType.ACCEPT:
                    acknowledged.add(offset)
        elif op == "expire":
            share.expire_locks(now)
        else:
            share.release_member(member)
        assert share.start_offset <= share.end_offset
        available = [
            o
            for o in range(share.start_offset, share.end_offset)
            if share.records[o].state is RecordState.AVAILABLE
        ]
        assert share.next_fetch_offset() == min(available, default=share.end_offset)
        assert all(
            o < share.start_offset or share.records[o].state is RecordState.ACKNOWLEDGED
            for o in acknowledged
        )
        restored = SharePartition.from_state(
            share.config, share.start_offset, share.state_batches()
        )
        assert restored.state_batches() == share.state_batches()
        # The deltas (ShareUpdate batches) overlaid on the first snapshot keep what matters.
        persisted = apply_update(
            persisted, ShareUpdate(0, 0, share.start_offset, tuple(share.take_changes()))
        )
        replayed = SharePartition.from_state(
            share.config, persisted.start_offset, persisted.batches
        )
        assert replayed.start_offset == share.start_offset
        for offset in acknowledged:
            assert offset < replayed.start_offset or (
                replayed.records[offset].state is RecordState.ACKNOWLEDGED
            )


# -- dead letters (KIP-1191) -----------------------------------------------------------------

DLQ_CONFIG = SharePartitionConfig(
    lock_duration_ms=LOCK_MS, delivery_count_limit=2, max_in_flight_records=100, dead_letter=True
)


def test_a_rejected_record_is_archiving_until_written_then_archived() -> None:
    share = SharePartition(DLQ_CONFIG, 0)
    share.acquire("m", batches((0, 2)), 10, now_ms=0)
    share.take_changes()
    assert share.acknowledge("m", [ack(0, 0, ACCEPT), ack(1, 1, REJECT)], 0) is ErrorCode.none
    # Offset 1 is ARCHIVING (persisted so, as Kafka 4.4): the SPSO stops at it.
    assert share.start_offset == 1
    changes = share.take_changes()
    assert changes == [StateBatch(1, 1, RecordState.ARCHIVING, 1)]
    # Written to the dead-letter topic only once ARCHIVING is committed.
    assert (share.pending_dead_letters(), share.take_dead_letters()) == (False, [])
    share.archiving_persisted(changes)
    assert share.pending_dead_letters()
    taken = share.take_dead_letters()
    assert [(d.offset, d.delivery_count, d.cause) for d in taken] == [
        (1, 1, "Offset rejected by client.")
    ]
    assert (share.take_dead_letters(), share.pending_dead_letters()) == ([], False)
    share.dead_lettered([1])
    assert share.start_offset == 2
    assert share.take_changes() == []  # below the SPSO: the start offset says it
    assert share.counts.archived == 1


def test_records_loaded_in_archiving_are_dead_letters_again_with_their_cause() -> None:
    state = [StateBatch(4, 5, RecordState.ARCHIVING, 1), StateBatch(6, 6, RecordState.ARCHIVING, 2)]
    share = SharePartition.from_state(DLQ_CONFIG, 4, state)
    assert share.start_offset == 4
    assert [(d.offset, d.delivery_count, d.cause) for d in share.take_dead_letters()] == [
        (4, 1, "Offset rejected by client."),
        (5, 1, "Offset rejected by client."),
        (6, 2, "Offset delivery count exceeded the threshold."),
    ]
    share.dead_lettered([4, 5, 6])
    assert (share.start_offset, share.end_offset) == (7, 7)


def test_the_delivery_count_limit_makes_a_dead_letter_and_gaps_never_do() -> None:
    share = SharePartition(DLQ_CONFIG, 0)
    share.acquire("m", batches((0, 1)), 10, now_ms=0)
    share.acknowledge("m", [ack(0, 0, GAP), ack(1, 1, RELEASE)], 0)
    share.acquire("m", batches((1, 1)), 10, now_ms=0)
    assert share.expire_locks(LOCK_MS) == 1  # the second delivery's lock: the limit
    share.archiving_persisted(share.take_changes())
    assert [(d.offset, d.delivery_count, d.cause) for d in share.take_dead_letters()] == [
        (1, 2, "Offset delivery count exceeded the threshold.")
    ]
    assert share.start_offset == 1
    share.dead_lettered([1])
    assert (share.start_offset, share.end_offset) == (2, 2)


def test_without_a_dead_letter_topic_a_rejected_record_is_archived_at_once() -> None:
    share = SharePartition(CONFIG, 0)
    share.acquire("m", batches((0, 0)), 10, now_ms=0)
    share.acknowledge("m", [ack(0, 0, REJECT)], 0)
    assert (share.start_offset, share.dead_letters) == (1, {})


def test_a_views_filtered_batches_acquire_only_their_records() -> None:
    """A view's read keeps each batch's offset range with only the matching records (an
    empty batch when none match): the offsets without a record are archived, never
    acquired, and a batch split into runs is sent once."""
    from kafkalite.broker.share_partition_manager import _covering, _fetched_batches
    from kafkalite.storage.records import Record, encode_record_batch

    def batch(base: int, offsets: list[int], last_delta: int) -> bytes:
        records = [Record(o, 0, None, b"v%d" % o) for o in offsets]
        return encode_record_batch(
            records,
            base_offset=base,
            base_timestamp=0,
            max_timestamp=0,
            last_offset_delta=last_delta,
        )

    partly, empty = batch(10, [12, 13, 17], 9), batch(20, [], 4)
    fetched = _fetched_batches(partly + empty, (), filtered=True)
    assert [b for b, _ in fetched] == [
        FetchedBatch(10, 11, skip=True),
        FetchedBatch(12, 13),
        FetchedBatch(14, 16, skip=True),
        FetchedBatch(17, 17),
        FetchedBatch(18, 19, skip=True),
        FetchedBatch(20, 24, skip=True),
    ]
    share = fresh(10)
    got = share.acquire("m1", [b for b, _ in fetched], max_records=100, now_ms=0)
    assert got == [AcquiredRecords(12, 13, 1), AcquiredRecords(17, 17, 1)]
    assert _covering(fetched, got) == partly
    assert share.acknowledge("m1", [ack(12, 13, ACCEPT), ack(17, 17, ACCEPT)], 0) is ErrorCode.none
    assert share.start_offset == 25  # past the archived offsets too
