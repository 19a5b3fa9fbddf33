"""Log compaction: what survives, offsets, reads across gaps, tombstones, swaps and crashes,
compressed input, segment merging, the dirty ratio and the cleaner checkpoint."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from batches import GZIP, LZ4, SNAPPY, ZSTD, Record, make_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.broker.topic_config import InvalidConfig, log_config_for, validate_topic_configs
from kafkalite.config import BrokerConfig
from kafkalite.storage.batch import iter_batches, parse_header
from kafkalite.storage.errors import OutOfOrderSequenceError
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.log_manager import CLEANER_OFFSET_CHECKPOINT, LogManager, read_checkpoint
from kafkalite.storage.records import decode_records
from kafkalite.storage.segment import LogSegment, segment_paths

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact")
DAY = 86_400_000

Entry = tuple[int, bytes | None, bytes | None]  # (offset, key, value)


class Crash(BaseException):
    """Stands for the process dying: nothing catches it, no cleanup runs."""


def open_log(path: Path, config: LogConfig = CONFIG, now_ms: int = 0) -> UnifiedLog:
    return UnifiedLog.open(path / "topic-0", config, now_ms=now_ms)


def put(log: UnifiedLog, *pairs: tuple[bytes | None, bytes | None], ts: int = 1_000, **kw) -> int:
    """Append one batch of (key, value) records; returns its first offset."""
    batch = make_batch([Record(key=k, value=v) for k, v in pairs], base_timestamp=ts, **kw)
    return log.append_as_leader(batch, 0, now_ms=ts).first_offset


def fill(log: UnifiedLog, count: int, keys: int = 5, ts: int = 1_000) -> dict[bytes, bytes]:
    """`count` single-record batches cycling through `keys` keys; returns the latest values."""
    latest = {}
    for i in range(count):
        key, value = b"k%d" % (i % keys), b"v%d" % i
        put(log, (key, value), ts=ts)
        latest[key] = value
    return latest


def entries(log: UnifiedLog, start: int | None = None) -> list[Entry]:
    """Every record from `start` (default: the log start) to the log end, read batch by batch."""
    out: list[Entry] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 10_000, log.log_end_offset)
        if not data:  # cleaning emptied everything up to an empty active segment (Kafka too)
            assert log.active_segment.size == 0
            break
        for position, header in iter_batches(data):
            batch = data[position : position + header.size]
            out += [(r.offset, r.key, r.value) for r in decode_records(batch) if r.offset >= offset]
            offset = header.last_offset + 1
    return out


def as_dict(records: list[Entry]) -> dict[bytes | None, bytes | None]:
    """The table a consumer builds: last value per key, tombstones delete."""
    table: dict[bytes | None, bytes | None] = {}
    for _, key, value in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def file_bytes(segment: LogSegment) -> bytes:
    return os.pread(segment.fd, segment.size, 0)


def leftover_names(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.name.endswith((".cleaned", ".swap")))


def drop_fds(log: UnifiedLog) -> None:
    """Forget the open files without flushing or snapshotting: what a crash leaves."""
    for segment in log.segments:
        segment.close_files()  # no flush, no snapshot, no final time index entry


# ---- what survives ---------------------------------------------------------------------------


def test_latest_value_per_key_survives_with_offsets_preserved(tmp_path) -> None:
    log = open_log(tmp_path)
    latest = fill(log, 60)
    before = entries(log)
    active = log.active_segment
    active_bytes, leo, start = file_bytes(active), log.log_end_offset, log.log_start_offset

    result = log.compact(now_ms=2_000)

    assert result is not None and result.first_dirty_offset == active.base_offset
    after = entries(log)
    assert set(after) <= set(before)  # same (offset, key, value) triples: offsets preserved
    cleaned = [e for e in after if e[0] < active.base_offset]
    latest_offsets = {key: offset for offset, key, _ in before}
    assert all(latest_offsets[key] == offset for offset, key, _ in cleaned)
    assert as_dict(after) == latest
    assert log.active_segment is active and file_bytes(active) == active_bytes
    assert (log.log_end_offset, log.log_start_offset) == (leo, start)
    assert result.bytes_reclaimed > 0
    log.close()


def test_newer_value_in_active_segment_drops_older_copies(tmp_path) -> None:
    log = open_log(tmp_path)
    put(log, (b"a", b"old"), (b"b", b"only"))
    log.roll(now_ms=1_000)
    put(log, (b"a", b"new"))

    log.compact(now_ms=2_000)

    assert entries(log) == [(1, b"b", b"only"), (2, b"a", b"new")]
    log.close()


def test_read_from_an_offset_in_a_gap_returns_the_next_records(tmp_path) -> None:
    log = open_log(tmp_path)
    put(log, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"))  # offsets 0-3
    put(log, (b"b", b"2"), (b"d", b"1"))  # 4-5
    put(log, (b"c", b"2"))  # 6
    put(log, (b"e", b"1"))  # 7
    log.roll(now_ms=1_000)
    put(log, (b"d", b"2"))  # 8: active

    log.compact(now_ms=2_000)

    assert entries(log) == [
        (2, b"a", b"2"),
        (4, b"b", b"2"),
        (6, b"c", b"2"),
        (7, b"e", b"1"),
        (8, b"d", b"2"),
    ]
    first = parse_header(log.read(0, 10_000, 100))  # batches keep their offset range
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 3, 1)
    assert entries(log, start=5) == [(6, b"c", b"2"), (7, b"e", b"1"), (8, b"d", b"2")]
    assert entries(log, start=3)[0] == (4, b"b", b"2")
    log.close()


def test_null_keys_are_kept_and_control_batches_copied(tmp_path) -> None:
    # A compacted log refuses keyless records, but one written under cleanup.policy=delete
    # may hold them when the topic turns compact.
    log = open_log(tmp_path, dataclasses.replace(CONFIG, cleanup_policy="delete"))
    put(log, (None, b"x"), (b"a", b"1"), (None, b"y"))
    put(log, (b"a", b"2"))
    log.roll(now_ms=1_000)
    put(log, (b"z", b"1"))
    log.update_config(CONFIG)

    log.compact(now_ms=2_000)

    assert entries(log) == [(0, None, b"x"), (2, None, b"y"), (3, b"a", b"2"), (4, b"z", b"1")]
    log.close()


# ---- tombstones ------------------------------------------------------------------------------


def test_tombstones_are_kept_until_delete_retention_then_removed(tmp_path) -> None:
    config = LogConfig(segment_bytes=600, cleanup_policy="compact", delete_retention_ms=DAY)
    log = open_log(tmp_path, config)
    put(log, (b"a", b"1"), (b"b", b"1"), ts=1_000)
    put(log, (b"a", None), ts=1_000)  # tombstone at offset 2
    log.roll(now_ms=1_000)
    put(log, (b"c", b"1"), ts=1_000)

    result = log.compact(now_ms=1_000 + DAY - 1)  # the tombstone's segment is a day old, less 1
    assert result is not None
    assert entries(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]

    log.roll(now_ms=1_000)  # new dirty data, so the log is cleaned again
    put(log, (b"d", b"1"), ts=1_000)
    assert log.compact(1_000 + DAY + 1, result.first_dirty_offset) is not None
    assert entries(log) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"d", b"1")]
    log.close()


# ---- min.compaction.lag.ms and the high watermark --------------------------------------------


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path) -> None:
    config = LogConfig(segment_bytes=10_000, cleanup_policy="compact", min_compaction_lag_ms=500)
    log = open_log(tmp_path, config)
    put(log, (b"a", b"1"), ts=100)
    log.roll(now_ms=100)
    put(log, (b"a", b"2"), ts=900)
    log.roll(now_ms=900)
    put(log, (b"a", b"3"), ts=950)
    log.roll(now_ms=950)
    put(log, (b"b", b"1"), ts=1_000)

    result = log.compact(now_ms=1_000)  # only the first segment is older than the lag

    assert result is not None and result.first_dirty_offset == 1
    assert entries(log) == [(1, b"a", b"2"), (2, b"a", b"3"), (3, b"b", b"1")]
    log.close()


def test_records_at_or_above_the_high_watermark_are_not_relied_on(tmp_path) -> None:
    log = open_log(tmp_path)
    put(log, (b"a", b"1"))
    log.roll(now_ms=1_000)
    put(log, (b"a", b"2"))  # offset 1: not yet replicated

    result = log.compact(now_ms=2_000, high_watermark=1)
    assert result is not None and result.segments_cleaned == 0
    assert entries(log) == [(0, b"a", b"1"), (1, b"a", b"2")]
    assert log.compact(now_ms=2_000, high_watermark=2) is not None
    assert entries(log) == [(1, b"a", b"2")]
    log.close()


# ---- idempotent producers ---------------------------------------------------------------------


def test_a_producers_last_batch_stays_as_an_empty_header(tmp_path) -> None:
    log = open_log(tmp_path)
    idempotent = {"producer_id": 7, "producer_epoch": 0}
    put(log, (b"a", b"1"), **idempotent, base_sequence=0)  # 0
    put(log, (b"b", b"1"), **idempotent, base_sequence=1)  # 1: the producer's last batch
    put(log, (b"a", b"2"), (b"b", b"2"))  # 2-3
    log.roll(now_ms=1_000)
    put(log, (b"c", b"1"))

    log.compact(now_ms=2_000)

    headers = [h for _, h in iter_batches(log.read(0, 10_000, 100))]
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (1, 0, 7),  # batch 0 dropped; batch 1 kept empty with its sequence
        (2, 2, -1),
    ]
    assert entries(log) == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"c", b"1")]
    log.close()
    for snapshot in (tmp_path / "topic-0").glob("*.snapshot"):
        snapshot.unlink()  # force producer state to be rebuilt from the log
    log = open_log(tmp_path)
    assert log.producer_state.last_entry(7).last_seq == 1
    with pytest.raises(OutOfOrderSequenceError):
        put(log, (b"a", b"3"), **idempotent, base_sequence=5)
    put(log, (b"a", b"3"), **idempotent, base_sequence=2)  # 5
    log.roll(now_ms=1_000)
    put(log, (b"c", b"2"))

    log.compact(now_ms=2_000)  # the bare header is no longer the producer's last batch

    headers = [h for _, h in iter_batches(log.read(0, 10_000, 100))]
    assert [(h.base_offset, h.records_count) for h in headers] == [(2, 1), (5, 1)]
    assert entries(log) == [(3, b"b", b"2"), (5, b"a", b"3"), (6, b"c", b"2")]
    log.close()


# ---- compressed input ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compressed_batches_are_filtered_and_untouched_ones_stay_compressed(
    tmp_path, codec
) -> None:
    log = open_log(tmp_path)
    put(log, (b"a", b"1"), (b"b", b"1"), (b"c", b"1"), compression=codec)  # 0-2
    put(log, (b"d", b"1"), (b"e", b"1"), compression=codec)  # 3-4: all kept
    put(log, (b"a", b"2"))  # 5
    log.roll(now_ms=1_000)
    put(log, (b"b", b"2"))  # 6

    log.compact(now_ms=2_000)

    data = log.read(0, 10_000, 6)
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset, h.compression) for h in headers] == [
        (0, 2, 0),  # rewritten uncompressed, offset range kept
        (3, 4, codec),  # copied as it was
        (5, 5, 0),
    ]
    assert entries(log) == [
        (2, b"c", b"1"),
        (3, b"d", b"1"),
        (4, b"e", b"1"),
        (5, b"a", b"2"),
        (6, b"b", b"2"),
    ]
    log.close()


# ---- segments --------------------------------------------------------------------------------


def test_repeated_cleaning_keeps_the_segment_count_bounded(tmp_path) -> None:
    log = open_log(tmp_path)
    first_dirty = None
    for round_ in range(30):
        fill(log, 12, keys=8)
        log.roll(now_ms=round_)
        result = log.compact(now_ms=round_, first_dirty_offset=first_dirty)
        assert result is not None
        first_dirty = result.first_dirty_offset
        assert len(log.segments) <= 3, [s.size for s in log.segments]
    assert len(as_dict(entries(log))) == 8
    for segment in log.segments:
        assert segment.size <= CONFIG.segment_bytes
    log.close()


def test_cleaned_segments_reopen_with_working_indexes(tmp_path) -> None:
    config = LogConfig(segment_bytes=3_000, index_interval_bytes=50, cleanup_policy="compact")
    log = open_log(tmp_path, config)
    fill(log, 120, keys=40)
    log.roll(now_ms=1_000)
    put(log, (b"tail", b"1"))
    log.compact(now_ms=2_000)
    expected = entries(log)
    assert log.fetch_offset_by_timestamp(1_000) == (80, 1_000, 0)
    log.close()

    log = open_log(tmp_path, config)
    assert entries(log) == expected
    for offset, _, _ in expected:
        assert entries(log, start=offset)[0][0] == offset
    assert log.fetch_offset_by_timestamp(1_000) == (80, 1_000, 0)
    log.close()


# ---- crash safety ----------------------------------------------------------------------------


def crashing_log(tmp_path: Path) -> tuple[UnifiedLog, list[Entry], list[Entry]]:
    """A log of several segments, its records, and what a complete cleaning leaves."""
    reference = open_log(tmp_path / "reference")
    log = open_log(tmp_path)
    for target in (reference, log):
        fill(target, 40, keys=4)
        target.roll(now_ms=1_000)
        put(target, (b"k9", b"tail"))
    reference.compact(now_ms=2_000)
    cleaned = entries(reference)
    reference.close()
    return log, entries(log), cleaned


def reopen_after_crash(tmp_path: Path, log: UnifiedLog) -> UnifiedLog:
    drop_fds(log)
    return open_log(tmp_path)


def test_crash_while_writing_the_cleaned_segment_keeps_the_old_ones(tmp_path, monkeypatch) -> None:
    log, original, _ = crashing_log(tmp_path)

    def crash(*args: object) -> None:
        raise Crash

    monkeypatch.setattr(UnifiedLog, "replace_segments", crash)
    with pytest.raises(Crash):
        log.compact(now_ms=2_000)
    # The cleaner removes its `.cleaned` files when it fails; a real crash leaves them.
    for path in segment_paths(log.dir, 0, ".cleaned"):
        path.write_bytes(b"half-written")
    monkeypatch.undo()

    log = reopen_after_crash(tmp_path, log)
    assert entries(log) == original
    assert leftover_names(log.dir) == []
    log.close()


@pytest.mark.parametrize("crash_at", ["delete_old", "final_rename"])
def test_crash_after_the_swap_commit_completes_the_swap_on_load(
    tmp_path, monkeypatch, crash_at
) -> None:
    log, original, cleaned = crashing_log(tmp_path)
    segment_count, leo = len(log.segments), log.log_end_offset
    if crash_at == "delete_old":
        calls = []

        def delete(segment: LogSegment) -> None:
            calls.append(segment)
            if len(calls) == 2:  # the first old segment is gone, the second not
                raise Crash
            real_delete(segment)

        real_delete = LogSegment.delete
        monkeypatch.setattr(LogSegment, "delete", delete)
    else:
        real_change = LogSegment.change_suffix

        def change_suffix(segment: LogSegment, suffix: str) -> None:
            if suffix == "":
                raise Crash
            real_change(segment, suffix)

        monkeypatch.setattr(LogSegment, "change_suffix", change_suffix)
    with pytest.raises(Crash):
        log.compact(now_ms=2_000)
    monkeypatch.undo()
    assert any(name.endswith(".log.swap") for name in leftover_names(log.dir))

    log = reopen_after_crash(tmp_path, log)
    assert entries(log) == cleaned != original
    assert log.log_end_offset == leo and len(log.segments) < segment_count
    assert leftover_names(log.dir) == []
    log.close()


def test_swap_whose_indexes_already_have_final_names_completes(tmp_path, monkeypatch) -> None:
    log, _, cleaned = crashing_log(tmp_path)
    real_change = LogSegment.change_suffix

    def change_suffix(segment: LogSegment, suffix: str) -> None:
        if suffix == "":  # crash after the indexes got their final names, before the log did
            for source, target in zip(
                segment_paths(segment.dir, segment.base_offset, ".swap")[1:],
                segment_paths(segment.dir, segment.base_offset)[1:],
                strict=True,
            ):
                os.replace(source, target)
            raise Crash
        real_change(segment, suffix)

    monkeypatch.setattr(LogSegment, "change_suffix", change_suffix)
    with pytest.raises(Crash):
        log.compact(now_ms=2_000)
    monkeypatch.undo()

    log = reopen_after_crash(tmp_path, log)
    assert entries(log) == cleaned
    assert leftover_names(log.dir) == []
    log.close()


def test_index_swap_files_without_a_log_swap_are_discarded(tmp_path) -> None:
    log, original, _ = crashing_log(tmp_path)
    log.close()
    for path in segment_paths(log.dir, 0, ".swap")[1:]:  # crash while renaming to .swap
        path.write_bytes(b"")
    log = open_log(tmp_path)
    assert entries(log) == original
    assert leftover_names(log.dir) == []
    log.close()


# ---- LogManager: dirty ratio and checkpoint --------------------------------------------------


def test_clean_logs_honours_the_dirty_ratio_and_checkpoints_progress(tmp_path) -> None:
    config = LogConfig(segment_bytes=100_000, cleanup_policy="compact")
    manager = LogManager(tmp_path)
    manager.load(lambda topic, partition: config, now_ms=0)
    compacted = manager.create_log("compacted", 0, config, now_ms=0)
    plain = manager.create_log("plain", 0, LogConfig(segment_bytes=100_000), now_ms=0)
    for log in (compacted, plain):
        fill(log, 50, keys=5)
        log.roll(now_ms=1_000)
        put(log, (b"k0", b"active"))

    assert manager.clean_logs(now_ms=2_000) > 0
    assert len(entries(plain)) == 51  # cleanup.policy=delete: not compacted
    checkpoint = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint == {("compacted", 0): 50}

    put(compacted, (b"k1", b"again"))  # a small dirty segment: ratio below 0.5
    compacted.roll(now_ms=1_000)
    put(compacted, (b"k2", b"active"))
    before = entries(compacted)
    assert manager.clean_logs(now_ms=2_000) == 0
    assert entries(compacted) == before

    for i in range(10):  # now most cleanable bytes are dirty
        put(compacted, (b"k%d" % (i % 3), b"new%d" % i))
    compacted.roll(now_ms=1_000)
    put(compacted, (b"k4", b"active"))
    assert manager.clean_logs(now_ms=2_000) > 0
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {
        ("compacted", 0): compacted.active_segment.base_offset
    }
    manager.shutdown()

    again = LogManager(tmp_path)
    again.load(lambda topic, partition: config, now_ms=0)
    assert again.cleaner_offsets == {("compacted", 0): 63}
    again.delete_log("compacted", 0)
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {}
    again.shutdown()


def test_a_stale_checkpoint_beyond_the_log_end_restarts_from_the_log_start(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 30, keys=3)
    log.roll(now_ms=1_000)
    put(log, (b"k0", b"tail"))
    result = log.compact(now_ms=2_000, first_dirty_offset=10_000)
    assert result is not None and result.segments_cleaned > 0
    assert len(entries(log)) == 3
    log.close()


# ---- property: the cleaned log still tells the same story ------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(
                st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]), st.booleans()),
                min_size=1,
                max_size=4,
            ),
            st.sampled_from([0, GZIP]),
        ),
        st.tuples(st.just("roll")),
        st.tuples(st.just("compact"), st.booleans()),
        st.tuples(st.just("crash_compact"), st.integers(0, 8)),
        st.tuples(st.just("reopen")),
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_cleaned_log_matches_a_dict_model(tmp_path_factory, ops) -> None:
    path = tmp_path_factory.mktemp("model")
    config = LogConfig(segment_bytes=400, index_interval_bytes=60, cleanup_policy="compact")
    log = open_log(path, config)
    written: dict[int, tuple[bytes | None, bytes | None]] = {}  # every record ever appended
    now, serial, first_dirty = 0, 0, None
    for op in ops:
        now += 1_000
        if op[0] == "append":
            pairs = []
            for key, tombstone in op[1]:
                serial += 1
                pairs.append((key, None if tombstone and key else b"v%d" % serial))
            first = put(log, *pairs, ts=now, compression=op[2])
            written.update({first + i: pair for i, pair in enumerate(pairs)})
        elif op[0] == "roll":
            log.roll(now_ms=now)
        elif op[0] == "compact":
            expire = op[1]  # jump past delete.retention.ms so tombstones may go
            now += DAY + 1 if expire else 0
            leo, start = log.log_end_offset, log.log_start_offset
            result = log.compact(now_ms=now, first_dirty_offset=first_dirty)
            assert (log.log_end_offset, log.log_start_offset) == (leo, start)
            if result is not None:
                first_dirty = result.first_dirty_offset
                check_cleaned_prefix(log, written, result.first_dirty_offset)
        elif op[0] == "crash_compact":
            leo = log.log_end_offset
            log = compact_and_crash(path, config, log, now, op[1])
            assert log.log_end_offset == leo
            first_dirty = None  # the checkpoint would not have been written
        else:
            log.close()
            log = open_log(path, config, now_ms=now)
        records = entries(log)
        assert all(written[offset] == (key, value) for offset, key, value in records)
        assert as_dict(records) == as_dict([(o, *kv) for o, kv in sorted(written.items())])
        active = log.active_segment.base_offset
        assert [o for o, _, _ in records if o >= active] == [o for o in written if o >= active]
        assert (log.log_end_offset, log.log_start_offset) == (len(written), 0)
    log.close()


def check_cleaned_prefix(
    log: UnifiedLog, written: dict[int, tuple[bytes | None, bytes | None]], end: int
) -> None:
    """Below the cleaned end, each keyed record is the newest for its key in the whole log."""
    latest = {key: offset for offset, (key, _) in sorted(written.items())}
    for offset, key, _ in entries(log):
        if offset < end and key is not None:
            assert latest[key] == offset


def compact_and_crash(
    path: Path, config: LogConfig, log: UnifiedLog, now: int, crash_at: int
) -> UnifiedLog:
    """Compact, dying before the `crash_at`-th segment file rename or deletion (if it gets
    that far), then reopen the log as a restart would."""
    steps: list[int] = []
    cleaned: list[LogSegment] = []
    real = LogSegment.delete, LogSegment.change_suffix, UnifiedLog.open_written_cleaned_segment

    def step(real_method):
        def method(segment: LogSegment, *args: object) -> None:
            steps.append(1)
            if len(steps) == crash_at:
                raise Crash
            real_method(segment, *args)

        return method

    def open_cleaned(self: UnifiedLog, *args: int) -> LogSegment:
        cleaned.append(real[2](self, *args))
        return cleaned[-1]

    LogSegment.delete, LogSegment.change_suffix = step(real[0]), step(real[1])
    UnifiedLog.open_written_cleaned_segment = open_cleaned
    try:
        log.compact(now_ms=now)
    except Crash:
        pass
    finally:
        LogSegment.delete, LogSegment.change_suffix = real[0], real[1]
        UnifiedLog.open_written_cleaned_segment = real[2]
    for segment in cleaned:
        if segment not in log.segments and not segment.closed:
            log.segments.append(segment)  # so drop_fds closes it too
    drop_fds(log)
    return open_log(path, config, now_ms=now)


def test_a_rewrite_too_large_for_recovery_keeps_the_compressed_original(tmp_path) -> None:
    config = LogConfig(segment_bytes=10_000, max_message_bytes=400, cleanup_policy="compact")
    log = open_log(tmp_path, config)
    big = b"x" * 200
    put(log, (b"a", big), (b"b", big), (b"c", big), compression=GZIP)  # small compressed
    put(log, (b"a", b"new"))
    log.roll(now_ms=1_000)
    put(log, (b"z", b"1"))

    log.compact(now_ms=2_000)

    headers = [h for _, h in iter_batches(log.read(0, 10_000, 100))]
    assert [(h.base_offset, h.compression) for h in headers] == [(0, GZIP), (3, 0)]
    log.close()


def test_topic_configs_reach_the_log_config() -> None:
    overrides = {
        "cleanup.policy": "compact",
        "delete.retention.ms": "5",
        "min.cleanable.dirty.ratio": "0.25",
        "min.compaction.lag.ms": "7",
    }
    config = log_config_for(BrokerConfig(), overrides)
    assert (config.delete_retention_ms, config.min_cleanable_dirty_ratio) == (5, 0.25)
    assert (config.min_compaction_lag_ms, config.cleanup_policy) == (7, "compact")
    defaults = log_config_for(BrokerConfig(), {})
    assert (defaults.delete_retention_ms, defaults.min_cleanable_dirty_ratio) == (DAY, 0.5)
    with pytest.raises(InvalidConfig):
        validate_topic_configs({"min.cleanable.dirty.ratio": "1.5"})
