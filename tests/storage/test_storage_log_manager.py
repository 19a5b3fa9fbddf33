"""LogManager: load, checkpoint files, clean shutdown marker, delete."""

from __future__ import annotations

import pytest
from batches import make_batch

from kafkalite.storage.log import LogConfig
from kafkalite.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
    parse_partition_dir,
    read_checkpoint,
)

CONFIG = LogConfig(segment_bytes=300)


def configs(topic: str, partition: int) -> LogConfig:
    return CONFIG


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0)),
        ("my-topic.v2-12", ("my-topic.v2", 12)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("meta.properties", None),
        ("orders-x", None),
    ],
)
def test_parse_partition_dir(name, expected) -> None:
    assert parse_partition_dir(name) == expected


def test_create_shutdown_and_load(tmp_path) -> None:
    manager = LogManager(tmp_path)
    assert manager.load(configs, now_ms=0) == {}
    log = manager.create_log("my-topic.v2", 3, CONFIG, now_ms=0)
    assert manager.create_log("my-topic.v2", 3, CONFIG, now_ms=0) is log
    for _ in range(8):
        log.append_as_leader(make_batch(1, value_size=100), 0, now_ms=0)
    log.delete_records_before(3)
    manager.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("my-topic.v2", 3): 8}
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_text() == "0\n1\nmy-topic.v2 3 3\n"

    again = LogManager(tmp_path)
    logs = again.load(configs, now_ms=0)
    assert again.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = logs[("my-topic.v2", 3)]
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 8)
    assert reopened.recovery_point == 8
    again.shutdown()


def test_load_after_crash_recovers_from_checkpoint(tmp_path) -> None:
    manager = LogManager(tmp_path)
    manager.load(configs, now_ms=0)
    log = manager.create_log("t", 0, CONFIG, now_ms=0)
    for _ in range(3):
        log.append_as_leader(make_batch(2), 0, now_ms=0)
    manager.checkpoint()
    with open(log.dir / f"{0:020d}.log", "ab") as f:
        f.write(b"\x00" * 30)  # torn write after the checkpoint; then "kill -9"
    again = LogManager(tmp_path)
    logs = again.load(configs, now_ms=0)
    assert not again.had_clean_shutdown
    assert logs[("t", 0)].log_end_offset == 6
    again.shutdown()


def test_delete_log_and_leftovers(tmp_path) -> None:
    manager = LogManager(tmp_path)
    manager.load(configs, now_ms=0)
    manager.create_log("a", 0, CONFIG, now_ms=0).append_as_leader(make_batch(1), 0, now_ms=0)
    manager.create_log("b", 0, CONFIG, now_ms=0)
    manager.delete_log("a", 0)
    assert ("a", 0) not in manager.logs
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["b-0"]
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("b", 0): 0}
    leftover = tmp_path / f"c-1.{'ab' * 16}-delete"
    leftover.mkdir()
    (leftover / f"{0:020d}.log").write_bytes(b"")
    manager.shutdown()
    again = LogManager(tmp_path)
    assert set(again.load(configs, now_ms=0)) == {("b", 0)}
    assert not leftover.exists()
    again.shutdown()


def test_retention_and_flush_all(tmp_path) -> None:
    manager = LogManager(tmp_path)
    manager.load(configs, now_ms=0)
    config = LogConfig(segment_bytes=300, retention_ms=1000, flush_ms=100)
    log = manager.create_log("t", 0, config, now_ms=0)
    for _ in range(6):
        log.append_as_leader(make_batch(1, value_size=100, base_timestamp=0), 0, now_ms=0)
    manager.flush_all(now_ms=50)
    assert log.recovery_point < log.log_end_offset
    manager.flush_all(now_ms=100)
    assert log.recovery_point == log.log_end_offset
    segments = len(log.segments)
    assert manager.apply_retention(now_ms=5000) == segments
    assert log.log_start_offset == log.log_end_offset == 6
    manager.shutdown()


def test_malformed_checkpoint_is_ignored(tmp_path) -> None:
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("0\n2\nt 0 5\n")
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {}
