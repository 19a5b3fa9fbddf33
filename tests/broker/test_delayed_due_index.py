"""The delay store's on-disk due-time index (broker/delayed_due_index.py): only the records due
within the horizon are in memory, the horizon advances with the clock, the index survives a
clean close, is rebuilt from the store when its checkpoint or a bucket file is torn or
missing, and its files go as released records leave the store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalite.broker import delayed_due_index as due_index
from kafkalite.broker.delayed_delivery_store import DelayStore, store_dir
from kafkalite.broker.delayed_due_index import (
    BUCKET_MS,
    CHECKPOINT,
    HORIZON_MS,
    INDEX_DIR,
    SUFFIX,
    DueIndex,
)
from kafkalite.storage.batch import parse_header
from kafkalite.storage.log import LogConfig
from kafkalite.storage.records import Record, encode_record_batch

T0 = 1_800_000_000_000 - 1_800_000_000_000 % BUCKET_MS  # a bucket's start
HOUR = 3_600_000


def open_store(path: Path, now_ms: int = T0) -> DelayStore:
    """(The partition released to is beyond any intent: the last one reached it.)"""
    return DelayStore.open(path, LogConfig(), now_ms, lambda tp: 2**40)


def hold(store: DelayStore, *dues: int) -> list[int]:
    """One batch of len(dues) records; their store offsets."""
    records = [Record(i, T0, b"k", b"v%d" % due, ()) for i, due in enumerate(dues)]
    batch = encode_record_batch(records, base_offset=0, base_timestamp=T0, max_timestamp=T0)
    held = store.hold(batch, parse_header(batch), dues, 0, T0)
    return list(range(held.first_offset, held.last_offset + 1))


def release(store: DelayStore, now_ms: int) -> list[int]:
    """Take what is due, write its intent and confirm it (no partition append: the index
    is what is tested)."""
    offsets = [offset for _, offset in store.take_due(now_ms, 1_000_000)]
    if offsets:
        store.write_intent(("t", 0), 0, sorted(offsets), now_ms)
    store.confirm(offsets)
    store.maintain(now_ms)  # trim, and checkpoint now and then
    return offsets


def crash(store: DelayStore) -> None:
    """Files closed as a kill -9 leaves them: no new checkpoint."""
    store.index.files.close()
    store.log.close()


def checkpoint(store: DelayStore) -> None:
    store.index.write_checkpoint(store.log.log_end_offset, store.open_txns)


def bucket_files(path: Path) -> list[str]:
    return sorted(p.name for p in (store_dir(path) / INDEX_DIR).glob(f"*{SUFFIX}"))


def test_only_records_due_within_the_horizon_are_in_memory(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    dues = [T0 + i * HOUR // 100 for i in range(1000)]  # 10 hours, 100 an hour
    for due in dues:
        hold(store, due)
    assert store.held_count == 1000
    in_memory = len(store.index.live)
    assert in_memory == sum(1 for due in dues if due < T0 + HORIZON_MS + BUCKET_MS)
    assert in_memory == 4
    assert len(bucket_files(tmp_path)) == 600  # one per minute of delays
    assert store.next_due_ms == T0

    later = T0 + 5 * HOUR
    released = release(store, later)
    assert len(released) == 501  # every record due by then, in due order
    assert store.held_count == 499
    assert len(store.index.live) == sum(
        1 for due in dues if later < due < later + HORIZON_MS + BUCKET_MS
    )
    assert store.next_due_ms == later + HOUR // 100


def test_an_unloaded_bucket_gives_the_next_due_time_and_loads_when_the_horizon_reaches_it(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    far = T0 + 2 * HOUR + 123
    hold(store, far)
    assert store.index.live == {}
    assert store.next_due_ms == far  # the timer wakes then, the horizon is there by then
    assert release(store, far - 1) == []
    assert len(store.index.live) == 1
    assert len(release(store, far)) == 1
    assert store.held_count == 0


def test_a_crash_indexes_the_store_from_the_last_checkpoint_on(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    first = hold(store, T0 + 100, T0 + HOUR)
    later = hold(store, T0 + 2 * HOUR)
    assert release(store, T0 + 100) == first[:1]
    store.close()  # checkpointed

    store = open_store(tmp_path)
    assert store.held_count == 2
    added = hold(store, T0 + 3 * HOUR)  # after the checkpoint
    store.next_checkpoint_ms = T0 + 10 * HOUR  # (none before the crash)
    assert release(store, T0 + HOUR) == first[1:]  # after the checkpoint too
    crash(store)

    store = open_store(tmp_path)
    assert store.held_count == 2
    assert store.next_due_ms == T0 + 2 * HOUR
    assert release(store, T0 + 3 * HOUR) == later + added
    crash(store)  # (recovering checkpointed: the releases are in the checkpoint's files)
    store = open_store(tmp_path)
    assert store.held_count == 0
    store.close()


def test_writes_after_the_checkpoint_that_never_reached_the_disk_are_recovered(
    tmp_path: Path,
) -> None:
    """A power loss: the index files are as at the checkpoint, the store has more."""
    store = open_store(tmp_path)
    first = hold(store, T0 + 100, T0 + 200, T0 + HOUR)
    store.close()
    saved = tmp_path / "saved"
    shutil.copytree(store_dir(tmp_path) / INDEX_DIR, saved)

    store = open_store(tmp_path)
    added = hold(store, T0 + 150)
    store.next_checkpoint_ms = T0 + 10 * HOUR
    assert release(store, T0 + 200) == [first[0], added[0], first[1]]
    crash(store)
    shutil.rmtree(store_dir(tmp_path) / INDEX_DIR)
    shutil.copytree(saved, store_dir(tmp_path) / INDEX_DIR)  # the tombstones never got there

    store = open_store(tmp_path)
    assert store.held_count == 1
    assert release(store, T0 + HOUR) == first[2:]  # nothing released twice
    store.close()


def test_records_released_and_trimmed_after_the_checkpoint_stay_released(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    hold(store, T0 + 100)
    store.close()
    checkpointed = store.log.log_end_offset
    store = open_store(tmp_path)
    hold(store, T0 + 200)
    store.next_checkpoint_ms = T0 + 10 * HOUR
    assert len(release(store, T0 + 200)) == 2
    assert store.log.log_start_offset == store.log.log_end_offset
    crash(store)
    # A checkpoint older than the store's log start is not used: all is indexed again.
    index = store_dir(tmp_path)
    assert DueIndex.open_checkpointed(index, checkpointed + 1, checkpointed + 9) is None
    assert DueIndex.open_checkpointed(index, checkpointed, checkpointed + 9) is not None

    store = open_store(tmp_path)
    assert store.held_count == 0
    store.close()
    assert bucket_files(tmp_path) == []


def test_a_torn_checkpoint_or_bucket_file_rebuilds_the_index(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    hold(store, T0 + 100)
    hold(store, T0 + HOUR, T0 + HOUR + 1)
    store.close()
    index_dir = store_dir(tmp_path) / INDEX_DIR
    checkpoint = index_dir / CHECKPOINT
    checkpoint.write_bytes(checkpoint.read_bytes()[:-3])  # torn

    store = open_store(tmp_path)
    assert store.held_count == 3
    store.close()
    bucket = index_dir / f"{(T0 + HOUR) // BUCKET_MS}{SUFFIX}"
    bucket.write_bytes(bucket.read_bytes()[:30])  # torn: the checkpoint does not match

    store = open_store(tmp_path)
    assert store.held_count == 3
    store.close()
    bucket.unlink()  # missing

    store = open_store(tmp_path)
    assert store.held_count == 3
    assert len(release(store, T0 + HOUR + 1)) == 3
    store.close()


def test_an_interrupted_release_is_resolved_on_the_next_open(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    offsets = hold(store, T0 + 100)
    store.take_due(T0 + 100, 10)
    store.write_intent(("t", 0), 5, offsets, T0 + 100)
    store.close()  # between the intent and the partition append: no checkpoint after it

    store = DelayStore.open(tmp_path, LogConfig(), T0, lambda tp: 5)  # not appended
    assert store.held_count == 1
    store.close()
    store = DelayStore.open(tmp_path, LogConfig(), T0, lambda tp: 6)  # (still held: clean)
    assert store.held_count == 1
    store.take_due(T0 + 100, 10)
    store.write_intent(("t", 0), 6, offsets, T0 + 100)
    crash(store)
    store = DelayStore.open(tmp_path, LogConfig(), T0, lambda tp: 7)  # appended
    assert store.held_count == 0
    store.close()


def test_files_go_as_the_log_start_moves_past_released_records(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    hold(store, T0 + 100)  # store offsets 0 (its dues) and 1
    hold(store, T0 + 2 * HOUR)  # 2 and 3: in a bucket not loaded
    hold(store, T0 + 200)  # 4 and 5
    assert len(bucket_files(tmp_path)) == 2
    release(store, T0 + 200)
    assert store.log.log_start_offset == 2  # the held record's dues, found unloaded
    assert len(bucket_files(tmp_path)) == 2
    checkpoint(store)
    assert len(bucket_files(tmp_path)) == 1  # its bucket emptied: gone with the checkpoint
    release(store, T0 + 2 * HOUR)
    checkpoint(store)
    assert store.log.log_start_offset == store.log.log_end_offset  # (intents included)
    assert bucket_files(tmp_path) == []
    assert store.held_count == 0
    store.close()
    store = open_store(tmp_path, T0 + 2 * HOUR)
    assert store.held_count == 0
    store.close()


def test_an_open_transactions_records_wait_for_its_end_across_a_clean_close(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    records = [Record(0, T0, b"k", b"v", ())]
    batch = encode_record_batch(
        records,
        base_offset=0,
        base_timestamp=T0,
        max_timestamp=T0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        attributes=0x10,  # transactional
    )
    store.hold(batch, parse_header(batch), [T0 + 100], 0, T0)
    assert release(store, T0 + 100) == []
    assert store.log.log_start_offset == 0  # its records stay
    store.close()

    store = open_store(tmp_path)
    assert store.held_count == 1
    assert release(store, T0 + 100) == []
    store.end_txn(7, True, T0 + 100)
    assert release(store, T0 + 100) == [1]
    store.close()


def test_a_big_bucket_is_loaded_a_budget_at_a_time_and_its_unread_part_still_counts(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    later = T0 + HOUR
    offsets = hold(store, *[later + i for i in range(5)])  # dues offset 0
    index = store.index
    assert index.advance(later - HORIZON_MS, budget=2) == 2
    assert len(index.live) == 2 and index.loading is not None
    added = hold(store, later + 10)  # to the bucket being loaded: in memory at once
    assert len(index.live) == 3
    assert index.next_due_ms == later
    assert index.low_dues_offset() == 0  # the unread entries' records stay in the store
    store.confirm(offsets[:2])
    assert index.low_dues_offset() == 0
    assert index.advance(later - HORIZON_MS, budget=2) == 2
    assert index.advance(later - HORIZON_MS, budget=2) == 1
    assert index.loading is None
    assert sorted(o for _, o in store.take_due(later + 10, 100)) == offsets[2:] + added
    store.close()


def test_a_rebuild_sorts_the_released_offsets_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(due_index, "_SORT_CHUNK", 2)
    store = open_store(tmp_path)
    offsets = hold(store, T0 + HOUR, *[T0 + 100 - i for i in range(5)], T0 + 2 * HOUR)
    released = release(store, T0 + 100)
    assert sorted(released) == offsets[1:6]
    assert store.log.log_start_offset == 0  # the first record is held still
    crash(store)

    store = open_store(tmp_path)
    assert store.held_count == 2
    assert release(store, T0 + 2 * HOUR) == [offsets[0], offsets[6]]
    store.close()


def test_released_records_behind_a_long_held_one_do_not_pile_up_in_memory(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    hold(store, T0 + 50_000)  # in memory, the lowest store offset, held all along
    for step in range(30):
        hold(store, *[T0 + step] * 100)
        release(store, T0 + step)
    assert store.held_count == 1
    assert len(store.index.live) == 1
    assert len(store.index.lows) <= 2 + 1024  # not the 3,000 released ones
    assert store.log.log_start_offset == 0  # the held record's dues
    store.close()


def test_a_checkpoint_is_written_once_its_files_are_synced_a_few_per_round(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    checkpoint(store)
    written = (store_dir(tmp_path) / INDEX_DIR / CHECKPOINT).read_bytes()
    for minute in range(20):
        hold(store, T0 + HOUR + minute * BUCKET_MS)
    index = store.index
    index.begin_checkpoint(store.log.log_end_offset, store.open_txns)
    hold(store, T0 + 2 * HOUR)  # after it: not in it
    assert [index.continue_checkpoint(8) for _ in range(3)] == [False, False, True]
    assert (store_dir(tmp_path) / INDEX_DIR / CHECKPOINT).read_bytes() != written
    crash(store)

    store = open_store(tmp_path)  # from the checkpoint, then the hold after it
    assert store.held_count == 21
    store.close()
