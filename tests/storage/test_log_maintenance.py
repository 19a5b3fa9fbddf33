"""Disk work off the event loop (issue 9, point 9): the cleaner, roll fsyncs and segment
removals run on worker threads while the loop keeps appending to the same log."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import trio
from batches import Record, make_batch

from kafkalite.broker import log_maintenance
from kafkalite.broker.broker import Broker
from kafkalite.broker.partition import Partition
from kafkalite.config import build_config
from kafkalite.storage.cleaner import CleanedSegments, CleanJob, Pause, clean_segments
from kafkalite.storage.log_cleaner import LogCleaner
from kafkalite.storage.records import decode_records

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "1000"}


def open_broker(log_dir: Path) -> Broker:
    return Broker.open(build_config({"log.dirs": str(log_dir)}))


def put(broker: Broker, partition: Partition, key: bytes, value: bytes) -> int:
    batch = make_batch([Record(key=key, value=value)], base_timestamp=time.time_ns() // 10**6)
    tp = (partition.topic, partition.index)
    results, _ = broker.replica_manager.append_records({tp: batch}, 1)
    assert results[tp].error == 0, results[tp]
    return results[tp].base_offset


def table(partition: Partition) -> dict[bytes, tuple[int, bytes]]:
    """key -> (offset, value) of its last record: what a consumer of the log ends up with."""
    out: dict[bytes, tuple[int, bytes]] = {}
    log = partition.log
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, log.log_end_offset)
        for record in decode_records(data):
            if record.offset >= offset:
                out[record.key] = (record.offset, record.value)
        offset = max(record.offset for record in decode_records(data)) + 1
    return out


def test_cleaning_runs_on_a_worker_thread_while_the_loop_appends_and_rolls(
    tmp_path: Path,
) -> None:
    broker = open_broker(tmp_path)
    assert broker.admin_manager.create_topic("c", 1, 1, COMPACTED)[0].ok
    partition = broker.replica_manager.partition("c", 0)
    assert partition is not None
    expected = {}
    for i in range(200):
        key = b"k%d" % (i % 5)
        expected[key] = (put(broker, partition, key, b"old-%d" % i), b"old-%d" % i)
    segments_before = len(partition.log.segments)
    seen: dict[str, object] = {}

    def during_cleaning() -> None:  # on the loop thread, while the worker cleans
        for i in range(50):
            key = b"k%d" % (i % 7)
            expected[key] = (put(broker, partition, key, b"new-%d" % i), b"new-%d" % i)
        seen["segments"] = len(partition.log.segments)
        seen["log_start"] = partition.log.delete_records_before(10)

    def clean(job: CleanJob, pause: Pause) -> CleanedSegments:
        seen["thread"] = threading.current_thread()
        trio.from_thread.run_sync(during_cleaning)
        return clean_segments(job, pause)

    on_a_thread = LogCleaner(worker_process=False, work=clean)  # where no process can start
    try:
        reclaimed = trio.run(log_maintenance.clean_logs, broker.replica_manager, on_a_thread)
        assert seen["thread"] is not threading.main_thread()
        assert reclaimed > 0
        # The appends rolled new segments; DeleteRecords moved the log start but deleted no
        # segment under the cleaner.
        assert seen["segments"] > segments_before
        assert seen["log_start"] == 10
        assert table(partition) == expected
        assert len(partition.log.segments) < seen["segments"]
    finally:
        broker.shutdown()
    reopened = open_broker(tmp_path)
    try:
        reopened_partition = reopened.replica_manager.partition("c", 0)
        assert reopened_partition is not None
        assert table(reopened_partition) == expected
        names = [p.name for p in (tmp_path / "c-0").iterdir()]
        assert [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))] == []
    finally:
        reopened.shutdown()


def test_a_roll_fsync_and_retention_unlinks_wait_for_the_worker(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    assert broker.admin_manager.create_topic("d", 1, 1, {"segment.bytes": "1000"})[0].ok
    partition = broker.replica_manager.partition("d", 0)
    assert partition is not None
    log = partition.log
    try:
        for i in range(60):
            put(broker, partition, b"k", b"value-%d" % i)
        assert len(log.segments) > 3
        assert log.recovery_point == 0  # the roll left its fsync to the worker
        log.delete_records_before(log.segments[2].base_offset)  # removes two segments
        doomed = sorted(p.name for p in (tmp_path / "d-0").iterdir() if ".deleted" in p.name)
        assert len(doomed) == 6  # two segments: .log, .index, .timeindex each, renamed

        trio.run(log_maintenance.run_disk_work, broker.replica_manager.log_manager.managers[0])

        assert log.recovery_point == log.active_segment.base_offset
        assert [p.name for p in (tmp_path / "d-0").iterdir() if ".deleted" in p.name] == []
    finally:
        broker.shutdown()


def test_a_deleted_topics_directories_are_removed_by_the_worker(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    assert broker.admin_manager.create_topic("gone", 3, 1, {})[0].ok
    partition = broker.replica_manager.partition("gone", 0)
    assert partition is not None
    try:
        put(broker, partition, b"k", b"v")
        broker.admin_manager.delete_topic("gone")
        leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("gone-"))
        assert len(leftovers) == 3 and all(name.endswith("-delete") for name in leftovers)

        trio.run(log_maintenance.run_disk_work, broker.replica_manager.log_manager.managers[0])

        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("gone-")] == []
    finally:
        broker.shutdown()
