"""LeaderEpochCache: Kafka's checkpoint format, assign, endOffsetFor and truncation."""

from __future__ import annotations

from kafkalite.storage.leader_epoch import LeaderEpochCache


def cache_with(tmp_path, *entries: tuple[int, int]) -> LeaderEpochCache:
    tmp_path.mkdir(exist_ok=True)
    cache = LeaderEpochCache.load(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_checkpoint_round_trip_in_kafka_format(tmp_path) -> None:
    cache_with(tmp_path, (0, 0), (2, 100), (5, 250))
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 100\n5 250\n"
    loaded = LeaderEpochCache.load(tmp_path)
    assert pairs(loaded) == [(0, 0), (2, 100), (5, 250)]
    assert loaded.loaded_ok and loaded.latest_epoch == 5


def test_assign_ignores_same_epoch_and_drops_contradicted(tmp_path) -> None:
    cache = cache_with(tmp_path, (1, 10), (1, 20), (3, 30))
    assert pairs(cache) == [(1, 10), (3, 30)]
    cache.assign(3, 25)  # same epoch, earlier start: replaces
    assert pairs(cache) == [(1, 10), (3, 25)]
    cache.assign(2, 40)  # lower epoch: later entries go
    assert pairs(cache) == [(1, 10), (2, 40)]


def test_end_offset_for(tmp_path) -> None:
    cache = cache_with(tmp_path, (1, 10), (3, 30), (6, 60))
    assert cache.end_offset_for(-1, 100) == (-1, -1)
    assert cache.end_offset_for(6, 100) == (6, 100)  # latest epoch: log end offset
    assert cache.end_offset_for(3, 100) == (3, 60)
    assert cache.end_offset_for(4, 100) == (3, 60)  # unknown epoch: previous one
    assert cache.end_offset_for(0, 100) == (0, 10)  # below every epoch
    assert cache.end_offset_for(7, 100) == (-1, -1)
    assert LeaderEpochCache.load(tmp_path / "none").end_offset_for(0, 5) == (-1, -1)


def test_truncate_from_end_and_start(tmp_path) -> None:
    cache = cache_with(tmp_path, (1, 10), (3, 30), (6, 60))
    cache.truncate_from_end(30)
    assert pairs(cache) == [(1, 10)]
    cache = cache_with(tmp_path / "b", (1, 10), (3, 30), (6, 60))
    cache.truncate_from_start(45)
    assert pairs(cache) == [(3, 45), (6, 60)]
    cache.truncate_from_start(5)
    assert pairs(cache) == [(3, 45), (6, 60)]
    assert pairs(LeaderEpochCache.load(tmp_path / "b")) == [(3, 45), (6, 60)]
    assert cache.epoch_for_offset(50) == 3 and cache.epoch_for_offset(44) == -1


def test_corrupt_checkpoint_is_rebuilt_from_the_log(tmp_path) -> None:
    from batches import make_batch

    from kafkalite.storage.log import LogConfig, UnifiedLog

    log = UnifiedLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200), now_ms=0)
    for epoch in (0, 0, 2, 2, 5):
        log.append_as_leader(make_batch(1, value_size=80), epoch, now_ms=0)
    log.close()
    (log.dir / "leader-epoch-checkpoint").write_text("garbage")
    reopened = UnifiedLog.open(log.dir, LogConfig(segment_bytes=200), now_ms=0, recovery_point=5)
    assert pairs(reopened.leader_epoch_cache) == [(0, 0), (2, 2), (5, 4)]
    reopened.close()
