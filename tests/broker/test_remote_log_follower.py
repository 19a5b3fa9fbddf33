"""A follower behind its tiered leader's local log start (Kafka's
OFFSET_MOVED_TO_TIERED_STORAGE): the leader refuses to send what is in the remote tier, the
follower rebuilds its log start, leader epochs and producer state from the remote segment
ending before the leader's local start, and fetches on from there."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing
from kio.schema.errors import ErrorCode
from partition_fixtures import batch, open_partition, state
from test_remote_log_manager import MemoryStore, ReplayedTopic, _tiered

from kafkalite.broker.partition import Partition
from kafkalite.broker.remote_log_manager import RemoteLogManager
from kafkalite.broker.replica_fetcher import (
    BuildAuxState,
    FetchSettings,
    Outcome,
    ReplicaFetcher,
    apply_partition_response,
)
from kafkalite.config import BrokerConfig
from kafkalite.storage.leader_epoch import EpochEntry
from kafkalite.storage.log import LogConfig
from kafkalite.storage.remote.metadata import RemoteLogSegments

LEADER, FOLLOWER = 1, 2
PRODUCER = 7
SETTINGS = FetchSettings(
    broker_id=FOLLOWER, max_bytes=1 << 20, wait_max_ms=500, min_bytes=1, backoff_ms=1000
)


def _replayed(dir: Path) -> RemoteLogSegments:
    remote = RemoteLogSegments(dir)
    remote.sink = lambda records: None
    return remote


def _tiered_leader(tmp_path: Path) -> tuple[Partition, ReplayedTopic, MemoryStore]:
    """Six one-batch segments of an idempotent producer, 0-2 in epoch 0 and 3-5 in epoch 1;
    0-4 uploaded and deleted locally; then a follower joins in epoch 2."""
    leader = open_partition(tmp_path, _tiered(), broker_id=LEADER)
    topic = ReplayedTopic(_replayed(tmp_path / "leader-replicated"))
    leader.log.remote = topic.remote
    for sequence in range(6):
        if sequence in (0, 3):
            epoch = sequence // 3
            leader.make_leader(state(LEADER, epoch, (LEADER,), partition_epoch=epoch), 0)
        records = batch(1, producer_id=PRODUCER, base_sequence=sequence)
        leader.append_records_to_leader(records, 1, min_isr=1, now_ms=1_000)
    store = MemoryStore()
    manager = RemoteLogManager(
        BrokerConfig({"broker.id": str(LEADER)}),
        lambda: [leader],
        lambda: 1_000,
        storage=store,  # type: ignore[arg-type]
        metadata_manager=topic,  # type: ignore[arg-type]
    )
    trio.run(manager.run_once)
    assert leader.log.apply_retention(1_000) == 5
    assert (leader.remote_log_start_offset, leader.log_start_offset) == (0, 5)
    leader.make_leader(state(LEADER, 2, (LEADER, FOLLOWER), (LEADER,), partition_epoch=2), 0)
    return leader, topic, store


def _follower(tmp_path: Path, topic: ReplayedTopic, store: MemoryStore) -> tuple[Partition, Any]:
    """A new replica whose broker has replayed the remote metadata (as every broker does)."""
    follower = open_partition(tmp_path, _tiered(), broker_id=FOLLOWER)
    follower.log.remote = _replayed(tmp_path / "follower-replicated")
    follower.log.remote.apply(topic.records)
    follower.make_follower(state(LEADER, 2, (LEADER, FOLLOWER), (LEADER,), partition_epoch=2))
    manager = RemoteLogManager(
        BrokerConfig({"broker.id": str(FOLLOWER)}),
        lambda: [follower],
        lambda: 1_000,
        storage=store,  # type: ignore[arg-type]
    )
    return follower, manager


def test_the_leader_answers_a_follower_below_its_local_start_offset_moved_to_tiered(
    tmp_path: Path,
) -> None:
    leader, _, _ = _tiered_leader(tmp_path)
    for offset in (0, 4):
        moved = leader.fetch_records(offset, 1 << 20, replica_id=FOLLOWER)
        assert (moved.error, moved.records) == (ErrorCode.offset_moved_to_tiered_storage, b"")
    # A consumer still reads the remote tier; the follower reads the local log as before.
    assert leader.fetch_records(0, 1 << 20).remote_fetch is not None
    local = leader.fetch_records(5, 1 << 20, replica_id=FOLLOWER)
    assert local.error is ErrorCode.none and local.records


def test_offset_moved_to_tiered_storage_is_rebuilt_from_the_remote_tier(tmp_path: Path) -> None:
    _, topic, store = _tiered_leader(tmp_path)
    follower, manager = _follower(tmp_path, topic, store)
    answer = SimpleNamespace(error_code=ErrorCode.offset_moved_to_tiered_storage)
    assert apply_partition_response(follower, answer, 1) is Outcome.MOVED_TO_TIERED

    assert trio.run(manager.build_remote_log_aux_state, follower, 5) is True

    assert (follower.log_start_offset, follower.log_end_offset) == (5, 5)
    # The leader's epochs (from the segment's uploaded checkpoint), starting at the log start.
    assert follower.log.leader_epoch_cache.entries == [EpochEntry(1, 5)]
    # The producer state at offset 5, from the uploaded producer snapshot.
    entry = follower.log.producer_state.last_entry(PRODUCER)
    assert entry is not None and entry.last_seq == 4
    # The remote tier is still the follower's log start across tiers.
    assert follower.earliest_offset == 0
    # Nothing below the leader's local start was copied into the local log.
    assert [s.base_offset for s in follower.log.segments] == [5]


def test_a_follower_without_its_segment_in_the_replayed_metadata_backs_off(
    tmp_path: Path,
) -> None:
    _, _, store = _tiered_leader(tmp_path)
    nothing_replayed = ReplayedTopic(_replayed(tmp_path / "nothing"))
    follower, manager = _follower(tmp_path, nothing_replayed, store)
    assert trio.run(manager.build_remote_log_aux_state, follower, 5) is False
    assert (follower.log_start_offset, follower.log_end_offset) == (0, 0)


@dataclass
class Sent:
    """A request the fetcher sent, with the follower's state when it was sent."""

    kind: str  # "fetch" (its offset) or "list_offsets" (the leader's answer)
    offset: int
    log_start_offset: int
    epochs: list[EpochEntry]
    producer_last_seq: int | None


def _fetch_from(
    leader: Partition, follower: Partition, build_aux_state: BuildAuxState | None
) -> list[Sent]:
    """Run the follower's fetcher against the leader's own answers (Fetch and ListOffsets,
    as a replica) until the follower reaches the leader's log end."""
    follower.topic_id = leader.topic_id  # the same topic
    fetcher = ReplicaFetcher(
        LEADER, SETTINGS, lambda _: None, lambda: 1_000, lambda _: None, build_aux_state
    )
    sent: list[Sent] = []

    def note(kind: str, offset: int) -> None:
        entry = follower.log.producer_state.last_entry(PRODUCER)
        last_seq = entry.last_seq if entry is not None else None
        epochs = list(follower.log.leader_epoch_cache.entries)
        sent.append(Sent(kind, offset, follower.log_start_offset, epochs, last_seq))

    async def connect() -> object:
        return object()

    async def request(_connection: object, request: Any) -> Any:
        if hasattr(request, "replica_state"):  # Fetch
            (entry,) = request.topics[0].partitions
            note("fetch", entry.fetch_offset)
            if entry.fetch_offset >= leader.log_end_offset:
                await trio.sleep_forever()  # parked on the leader: nothing more to read
            result = leader.fetch_records(
                entry.fetch_offset,
                1 << 20,
                replica_id=FOLLOWER,
                last_fetched_epoch=entry.last_fetched_epoch,
            )
            data = SimpleNamespace(
                partition_index=0,
                error_code=result.error,
                records=result.records,
                high_watermark=result.high_watermark,
                log_start_offset=result.log_start_offset,
                diverging_epoch=None,
            )
            topic_answer = SimpleNamespace(topic_id=leader.topic_id, partitions=[data])
            return SimpleNamespace(error_code=ErrorCode.none, responses=[topic_answer])
        (entry,) = request.topics[0].partitions  # ListOffsets, as a replica
        error, (offset, _, _) = leader.fetch_offset_for_timestamp(
            entry.timestamp, entry.current_leader_epoch, from_client=False
        )
        note("list_offsets", offset)
        answer = SimpleNamespace(partition_index=0, error_code=error, offset=offset)
        return SimpleNamespace(topics=[SimpleNamespace(name=leader.topic, partitions=[answer])])

    fetcher._connect = connect  # type: ignore[method-assign]
    fetcher._request = request  # type: ignore[method-assign]
    fetcher.add(follower)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetcher.run)
            while follower.log_end_offset < leader.log_end_offset:
                await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return sent


def test_the_fetcher_rebuilds_then_fetches_on_from_the_leaders_local_start(
    tmp_path: Path,
) -> None:
    """Fetch at 0 (moved to tiered storage), ListOffsets for the leader's local start, the
    rebuild, then fetches from 5 on."""
    leader, topic, store = _tiered_leader(tmp_path)
    follower, manager = _follower(tmp_path, topic, store)
    sent = _fetch_from(leader, follower, manager.build_remote_log_aux_state)
    assert [(s.kind, s.offset) for s in sent] == [
        ("fetch", 0),
        ("list_offsets", 5),
        ("fetch", 5),
        ("fetch", 6),
    ]
    assert (follower.log_start_offset, follower.log_end_offset) == (5, 6)
    assert follower.log.leader_epoch_cache.entries == [EpochEntry(1, 5)]


def test_a_follower_below_the_leaders_remote_log_start_truncates_then_rebuilds(
    tmp_path: Path,
) -> None:
    """Kafka's handleOutOfRangeError then its tier state machine: the leader's log start
    (DeleteRecords to 3, in the remote tier) is past the follower's end, so the fetch at 0
    is OFFSET_OUT_OF_RANGE; the follower starts over empty at the leader's log start 3 (its
    ListOffsets earliest), whose fetch is OFFSET_MOVED_TO_TIERED_STORAGE: it rebuilds at the
    leader's earliest local offset 5 with the leader's epochs and producer state (before, it
    started at 5 with neither), and fetches on to the leader's end."""
    leader, topic, store = _tiered_leader(tmp_path)
    assert leader.delete_records_on_leader(3) == (ErrorCode.none, 3)
    assert (leader.remote_log_start_offset, leader.log_start_offset) == (3, 5)
    follower, manager = _follower(tmp_path, topic, store)
    sent = _fetch_from(leader, follower, manager.build_remote_log_aux_state)
    assert [(s.kind, s.offset, s.log_start_offset) for s in sent] == [
        ("fetch", 0, 0),
        ("list_offsets", 3, 0),
        ("fetch", 3, 3),
        ("list_offsets", 5, 3),
        ("fetch", 5, 5),
        ("fetch", 6, 5),
    ]
    at_local_start = sent[4]
    assert at_local_start.epochs == [EpochEntry(1, 5)]
    assert at_local_start.producer_last_seq == 4
    assert (follower.log_start_offset, follower.log_end_offset) == (5, 6)
    assert [s.base_offset for s in follower.log.segments] == [5]
    assert follower.log.read(5, 1 << 20, 6, True)


def test_a_follower_below_a_plain_leaders_log_start_starts_over_there(tmp_path: Path) -> None:
    """Not tiered: a follower that stopped at 2 while DeleteRecords moved the leader's log
    start to 4 starts over empty at 4 (Kafka's truncateFullyAndStartAt), nothing below."""
    leader = open_partition(tmp_path, LogConfig(segment_bytes=100), broker_id=LEADER)
    follower = open_partition(tmp_path, LogConfig(segment_bytes=100), broker_id=FOLLOWER)
    leader.make_leader(state(LEADER, 0, (LEADER, FOLLOWER), (LEADER,)), 0)
    follower.make_follower(state(LEADER, 0, (LEADER, FOLLOWER), (LEADER,)))
    for sequence in range(6):
        records = batch(1, producer_id=PRODUCER, base_sequence=sequence)
        leader.append_records_to_leader(records, 1, min_isr=1, now_ms=1_000)
    for offset in (0, 1):  # replicated, then the follower stopped
        replicated = leader.log.read(offset, 1 << 20, offset + 1, True)
        assert follower.append_records_to_follower(replicated, 1_000) is ErrorCode.none
    assert leader.delete_records_on_leader(4) == (ErrorCode.none, 4)
    sent = _fetch_from(leader, follower, None)
    assert [(s.kind, s.offset, s.log_start_offset) for s in sent] == [
        ("fetch", 2, 0),
        ("list_offsets", 4, 0),
        ("fetch", 4, 4),
        ("fetch", 5, 4),
        ("fetch", 6, 4),
    ]
    assert (follower.log_start_offset, follower.log_end_offset) == (4, 6)
    assert min(s.base_offset for s in follower.log.segments) == 4


class ElectingStore(MemoryStore):
    """The follower is elected leader while it reads the remote segment's objects."""

    def __init__(self, objects: dict[tuple[uuid.UUID, str], bytes]) -> None:
        super().__init__()
        self.objects = objects
        self.follower: Partition | None = None

    def fetch(self, *args: Any, **kwargs: Any) -> bytes:
        assert self.follower is not None
        self.follower.make_leader(
            state(FOLLOWER, 3, (LEADER, FOLLOWER), (FOLLOWER,), partition_epoch=3), 0
        )
        return super().fetch(*args, **kwargs)


def test_a_follower_elected_during_the_rebuild_keeps_its_log(tmp_path: Path) -> None:
    _, topic, store = _tiered_leader(tmp_path)
    electing = ElectingStore(store.objects)
    follower, manager = _follower(tmp_path, topic, electing)
    electing.follower = follower
    assert trio.run(manager.build_remote_log_aux_state, follower, 5) is False
    assert follower.is_leader
    assert (follower.log_start_offset, follower.log_end_offset) == (0, 0)
