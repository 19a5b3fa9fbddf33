"""Timestamp lookups: record decoding for every codec, ListOffsets semantics."""

from __future__ import annotations

import pytest
from batches import GZIP, LZ4, NONE, SNAPPY, SNAPPY_RAW, ZSTD, Record, make_batch

from kafkalite.storage.errors import CorruptRecordError
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.records import record_timestamps

INDEXED = LogConfig(index_interval_bytes=50)
CODECS = [NONE, GZIP, SNAPPY, SNAPPY_RAW, LZ4, ZSTD]


@pytest.mark.parametrize("codec", CODECS)
def test_record_timestamps_every_codec(codec) -> None:
    records = [
        Record(timestamp=50, key=b"k" * 200, value=b"v" * 300, headers=[("h", b"x"), ("n", None)]),
        Record(timestamp=20, value=None),
        Record(timestamp=90),
    ]
    batch = make_batch(records, base_offset=7, base_timestamp=50, compression=codec)
    assert record_timestamps(batch) == [(7, 50), (8, 20), (9, 90)]


def test_record_timestamps_log_append_time() -> None:
    batch = make_batch([Record(timestamp=5), Record(timestamp=9)], log_append_time=True)
    assert [ts for _, ts in record_timestamps(batch)] == [9, 9]


def test_undecodable_payload_is_corrupt() -> None:
    batch = bytearray(make_batch(3, compression=GZIP))
    batch[70:80] = b"\x00" * 10
    with pytest.raises(CorruptRecordError):
        record_timestamps(bytes(batch))


def build(tmp_path, codec: int, config: LogConfig = INDEXED):
    log = UnifiedLog.open(tmp_path / "t-0", config, now_ms=0)
    stamps = [[100, 300, 200], [150, 250], [400, 350], [400, 500, 450]]
    for i, batch in enumerate(stamps):
        records = [Record(timestamp=ts, value=b"v" * 40) for ts in batch]
        log.append_as_leader(
            make_batch(records, base_timestamp=batch[0], compression=codec), i, now_ms=0
        )
    return log


@pytest.mark.parametrize("codec", CODECS)
def test_fetch_offset_by_timestamp(tmp_path, codec) -> None:
    log = build(tmp_path, codec)
    assert log.fetch_offset_by_timestamp(0) == (0, 100, 0)
    assert log.fetch_offset_by_timestamp(150) == (1, 300, 0)  # first record with ts >= 150
    assert log.fetch_offset_by_timestamp(301) == (5, 400, 2)
    assert log.fetch_offset_by_timestamp(500) == (8, 500, 3)
    assert log.fetch_offset_by_timestamp(501) is None
    assert log.max_timestamp_entry() == (8, 500, 3)
    log.close()


def test_fetch_offset_by_timestamp_across_segments_and_log_start(tmp_path) -> None:
    log = build(tmp_path, NONE, LogConfig(segment_bytes=250, index_interval_bytes=10))
    assert len(log.segments) > 2
    assert log.fetch_offset_by_timestamp(450) == (8, 500, 3)
    log.delete_records_before(2)
    assert log.fetch_offset_by_timestamp(150) == (2, 200, 0)
    assert log.fetch_offset_by_timestamp(210) == (4, 250, 1)
    log.close()
    reopened = UnifiedLog.open(
        tmp_path / "t-0",
        LogConfig(segment_bytes=250),
        now_ms=0,
        recovery_point=0,
        log_start_offset=2,
    )
    assert reopened.fetch_offset_by_timestamp(350) == (5, 400, 2)
    assert reopened.max_timestamp_entry() == (8, 500, 3)
    reopened.close()


def test_max_timestamp_entry_first_holder_and_empty(tmp_path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    assert log.max_timestamp_entry() is None
    assert log.fetch_offset_by_timestamp(0) is None
    log.append_as_leader(make_batch([Record(timestamp=9), Record(timestamp=9)]), 1, now_ms=0)
    log.append_as_leader(make_batch([Record(timestamp=9)]), 2, now_ms=0)
    assert log.max_timestamp_entry() == (0, 9, 1)
    log.close()


def test_epoch_for_offset(tmp_path) -> None:
    log = build(tmp_path, NONE)
    assert [log.epoch_for_offset(o) for o in range(10)] == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3][:10]
    assert log.epoch_for_offset(10) == 3  # the log end: the latest epoch, as Kafka
    empty = UnifiedLog.open(tmp_path / "e-0", LogConfig(), now_ms=0)
    assert empty.epoch_for_offset(0) == -1
    empty.close()
    log.close()
