"""LogDirs (JBOD): placement, moves, interrupted moves and duplicates found at load."""

from __future__ import annotations

import shutil

import pytest
from batches import make_batch

from kafkalite.storage.log import LogConfig
from kafkalite.storage.log_dirs import DuplicateLogError, LogDirs

CONFIG = LogConfig(segment_bytes=300)


def configs(topic: str, partition: int) -> LogConfig:
    return CONFIG


def opened(tmp_path) -> LogDirs:
    log_dirs = LogDirs.for_dirs([tmp_path / "a", tmp_path / "b", tmp_path / "c"])
    log_dirs.load(configs, now_ms=0)
    return log_dirs


def placement(log_dirs: LogDirs) -> dict[str, list[int]]:
    return {m.log_dir.name: sorted(p for _, p in m.logs) for m in log_dirs.managers}


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path) -> None:
    log_dirs = opened(tmp_path)
    for partition in range(7):
        log_dirs.create_log("t", partition, CONFIG, now_ms=0)
    assert placement(log_dirs) == {"a": [0, 3, 6], "b": [1, 4], "c": [2, 5]}
    log_dirs.shutdown()
    again = opened(tmp_path)
    assert placement(again) == {"a": [0, 3, 6], "b": [1, 4], "c": [2, 5]}
    again.shutdown()


def test_move_keeps_the_data(tmp_path) -> None:
    log_dirs = opened(tmp_path)
    log = log_dirs.create_log("t", 0, CONFIG, now_ms=0)
    for _ in range(5):
        log.append_as_leader(make_batch(3, value_size=40), 0, now_ms=0)
    size, end = log.size_in_bytes, log.log_end_offset
    moved = log_dirs.move_log(("t", 0), log_dirs.managers[2], now_ms=0)
    assert (moved.dir, moved.size_in_bytes, moved.log_end_offset) == (
        tmp_path / "c" / "t-0",
        size,
        end,
    )
    assert placement(log_dirs) == {"a": [], "b": [], "c": [0]}
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir()) == []
    log_dirs.shutdown()


@pytest.mark.parametrize("source_left", [True, False])
def test_an_interrupted_move_is_finished_or_undone(tmp_path, source_left: bool) -> None:
    log_dirs = opened(tmp_path)
    log = log_dirs.create_log("t", 0, CONFIG, now_ms=0)
    log.append_as_leader(make_batch(3), 0, now_ms=0)
    log_dirs.shutdown()
    # The copy was made; the crash came before (or after) the source was renamed away.
    future = tmp_path / "b" / f"t-0.{'0' * 32}-future"
    shutil.copytree(tmp_path / "a" / "t-0", future)
    if not source_left:
        shutil.rmtree(tmp_path / "a" / "t-0")
    again = opened(tmp_path)
    assert placement(again) == (
        {"a": [0], "b": [], "c": []} if source_left else {"a": [], "b": [0], "c": []}
    )
    assert not future.exists()
    assert again.logs[("t", 0)].log_end_offset == 3
    again.shutdown()


def test_a_partition_in_two_dirs_refuses_to_load(tmp_path) -> None:
    log_dirs = opened(tmp_path)
    log_dirs.create_log("t", 0, CONFIG, now_ms=0)
    log_dirs.shutdown()
    shutil.copytree(tmp_path / "a" / "t-0", tmp_path / "b" / "t-0")
    with pytest.raises(DuplicateLogError, match="duplicate log directories for t-0"):
        opened(tmp_path)
