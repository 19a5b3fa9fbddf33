"""The replica fetcher's sans-IO decisions: the Fetch it sends as a replica, and what it does
with each partition's answer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio
import trio.testing
from kio.schema.errors import ErrorCode
from partition_fixtures import batch, open_partition, state

from kafkalite.broker.replica_fetcher import (
    FetchSettings,
    Outcome,
    ReplicaFetcher,
    apply_partition_response,
    fetch_request,
)

A, B = 1, 2
SETTINGS = FetchSettings(
    broker_id=B, max_bytes=1 << 20, wait_max_ms=500, min_bytes=1, backoff_ms=1000
)
NO_DIVERGENCE = SimpleNamespace(epoch=-1, end_offset=-1)


def answer(
    error=ErrorCode.none, records=b"", high_watermark=0, diverging=NO_DIVERGENCE, log_start=0
):
    return SimpleNamespace(
        error_code=error,
        records=records,
        high_watermark=high_watermark,
        diverging_epoch=diverging,
        log_start_offset=log_start,
    )


def follower(tmp_path):
    partition = open_partition(tmp_path, broker_id=B)
    partition.make_follower(state(A, 4, (A, B)))
    return partition


def test_the_fetch_names_this_replica_its_log_end_and_last_epoch(tmp_path) -> None:
    partition = follower(tmp_path)
    leader = open_partition(tmp_path, broker_id=A)
    leader.make_leader(state(A, 4, (A, B)), now_ms=0)
    leader.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=0)
    partition.append_records_to_follower(leader.log.read(0, 1 << 20, 3), 0)
    request = fetch_request([partition], SETTINGS)
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (B, -1)
    assert (request.min_bytes, request.max_wait.total_seconds()) == (1, 0.5)
    (topic,) = request.topics
    (entry,) = topic.partitions
    assert topic.topic_id == partition.topic_id
    assert (entry.fetch_offset, entry.last_fetched_epoch, entry.current_leader_epoch) == (3, 4, 4)


def test_records_are_appended_and_the_high_watermark_learnt(tmp_path) -> None:
    partition = follower(tmp_path)
    leader = open_partition(tmp_path, broker_id=A)
    leader.make_leader(state(A, 4, (A,), (A,)), now_ms=0)
    leader.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    records = leader.log.read(0, 1 << 20, 2)
    assert apply_partition_response(partition, answer(records=records, high_watermark=2), 1) is (
        Outcome.FETCHED
    )
    assert (partition.log_end_offset, partition.high_watermark) == (2, 2)


def test_errors_back_off_or_wait_for_the_next_state(tmp_path) -> None:
    partition = follower(tmp_path)
    for error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
        assert apply_partition_response(partition, answer(error), 1) is Outcome.AWAIT_STATE
    for error in (ErrorCode.unknown_leader_epoch, ErrorCode.kafka_storage_error):
        assert apply_partition_response(partition, answer(error), 1) is Outcome.BACK_OFF


def test_a_diverging_epoch_truncates_by_leader_epoch(tmp_path) -> None:
    partition = follower(tmp_path)
    other = open_partition(tmp_path, broker_id=3)
    other.make_leader(state(3, 4, (3,), (3,)), now_ms=0)
    other.append_records_to_leader(batch(2), 1, min_isr=1, now_ms=0)
    other.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=0)
    partition.append_records_to_follower(other.log.read(0, 1 << 20, 5), 0)  # epoch 4: 0-4
    diverging = SimpleNamespace(epoch=4, end_offset=2)  # the leader's epoch 4 ends at 2
    outcome = apply_partition_response(partition, answer(diverging=diverging), 1)
    assert (outcome, partition.log_end_offset) == (Outcome.TRUNCATED, 2)


def test_after_records_the_next_fetch_goes_out_at_once(tmp_path) -> None:
    # The next fetch carries the new log end: the leader advances its high watermark (and
    # answers acks=all produces) one round trip after the records, not a max wait later.
    partition = follower(tmp_path)
    leader = open_partition(tmp_path, broker_id=A)
    leader.make_leader(state(A, 4, (A, B)), now_ms=0)
    leader.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=0)
    records = leader.log.read(0, 1 << 20, 3)
    fetcher = ReplicaFetcher(A, SETTINGS, lambda _: None, lambda: 0, lambda _: None)
    sent: list[tuple[float, int]] = []

    async def connect() -> object:
        return object()

    async def request(_connection: object, fetch: Any) -> Any:
        sent.append((trio.current_time(), fetch.topics[0].partitions[0].fetch_offset))
        if len(sent) > 1:
            await trio.sleep_forever()  # parked on the leader
        data = SimpleNamespace(partition_index=0, **vars(answer(records=records)))
        topic = SimpleNamespace(topic_id=partition.topic_id, partitions=[data])
        return SimpleNamespace(error_code=ErrorCode.none, responses=[topic])

    fetcher._connect = connect  # type: ignore[method-assign]
    fetcher._request = request  # type: ignore[method-assign]
    fetcher.add(partition)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetcher.run)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock())
    assert sent == [(0.0, 0), (0.0, 3)]
