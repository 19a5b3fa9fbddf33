"""The cleaner's CPU work runs in a worker process (issue 9, point 9): it writes what a
cleaning in this process writes, and a worker killed mid-clean leaves the log as it was."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
from batches import Record, make_batch
from test_log_maintenance import table

from kafkalite.broker import log_maintenance
from kafkalite.broker.broker import Broker
from kafkalite.broker.partition import Partition
from kafkalite.config import build_config
from kafkalite.storage import log_cleaner
from kafkalite.storage.cleaner import CleanedSegments, CleanJob, CleanResult, Pause, clean_segments
from kafkalite.storage.log_cleaner import LogCleaner
from kafkalite.storage.segment import CLEANED_SUFFIX, segment_paths

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "1000"}
TIMESTAMP = 1_700_000_000_000
PRODUCER_ID = 7


@pytest.fixture
def broker(tmp_path: Path):
    opened = fill(tmp_path / "a")
    yield opened
    opened.shutdown()


def fill(log_dir: Path) -> Broker:
    """A compacted log of 300 records over 5 keys from one idempotent producer, many
    segments; the same bytes every time."""
    broker = Broker.open(build_config({"log.dirs": str(log_dir)}))
    assert broker.admin_manager.create_topic("c", 1, 1, COMPACTED)[0].ok
    for i in range(300):
        record = Record(key=b"k%d" % (i % 5), value=b"v%d" % i)
        batch = make_batch(
            [record],
            base_timestamp=TIMESTAMP + i,
            producer_id=PRODUCER_ID,
            producer_epoch=0,
            base_sequence=i,
        )
        results, _ = broker.replica_manager.append_records({("c", 0): batch}, 1)
        assert results[("c", 0)].error == 0, results
    return broker


def partition_of(broker: Broker) -> Partition:
    partition = broker.replica_manager.partition("c", 0)
    assert partition is not None
    return partition


def clean_now(broker: Broker, in_process: bool) -> CleanResult | None:
    """One cleaning of c-0 as log_maintenance does it: with the broker's cleaner (its worker
    process), or with one that cleans on a worker thread of this process."""
    partition = partition_of(broker)
    manager = broker.replica_manager.log_manager.managers[0]
    now_ms = TIMESTAMP + 10_000
    cleanable = manager.plan_cleaning(("c", 0), now_ms, partition.high_watermark)
    assert cleanable is not None
    cleaner = (
        broker.replica_manager.log_manager.cleaner
        if in_process
        else LogCleaner(worker_process=False)
    )

    async def clean() -> CleanResult | None:
        partition.log.cleaning = True
        try:
            return await log_maintenance.clean_log(cleaner, partition.log, cleanable, now_ms)
        finally:
            partition.log.cleaning = False

    return trio.run(clean)


def log_files(log_dir: Path) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted((log_dir / "c-0").iterdir())
        if path.suffix in (".log", ".index", ".timeindex", ".cleaned", ".swap", ".deleted")
    }


def test_the_worker_process_cleans_exactly_as_a_cleaning_in_this_process(
    broker: Broker, tmp_path: Path
) -> None:
    expected = table(partition_of(broker))
    segments_before = len(partition_of(broker).log.segments)
    other = fill(tmp_path / "b")
    try:
        in_thread = clean_now(other, in_process=False)
        thread_files = log_files(tmp_path / "b")
    finally:
        other.shutdown()

    result = clean_now(broker, in_process=True)

    assert result is not None and in_thread is not None
    assert result.cleaner_pid != os.getpid()
    assert result.cleaner_pid in broker.replica_manager.log_manager.cleaner.worker_pids()
    assert in_thread.cleaner_pid == os.getpid()
    assert (result.segments_cleaned, result.segments_written) == (
        in_thread.segments_cleaned,
        in_thread.segments_written,
    )
    assert result.bytes_reclaimed == in_thread.bytes_reclaimed > 0
    assert len(partition_of(broker).log.segments) < segments_before
    assert table(partition_of(broker)) == expected
    assert log_files(tmp_path / "a") == thread_files  # same names, same bytes


def clean_then_die(job: CleanJob, pause: Pause) -> CleanedSegments:
    """The work of the cleaner below: the real cleaning, killed (SIGKILL) once its first
    `.cleaned` segment holds data."""
    cleaned = segment_paths(Path(job.dir), job.sources[0].base_offset, CLEANED_SUFFIX)[0]

    def die_once_written() -> None:
        pause()
        if cleaned.exists() and cleaned.stat().st_size > 0:
            os.kill(os.getpid(), signal.SIGKILL)

    return clean_segments(job, die_once_written)


def test_a_worker_killed_mid_clean_leaves_the_log_intact_and_the_next_round_cleans(
    broker: Broker, tmp_path: Path
) -> None:
    partition = partition_of(broker)
    expected = table(partition)
    files_before = log_files(tmp_path / "a")
    dying = LogCleaner(work=clean_then_die)
    try:
        assert trio.run(log_maintenance.clean_logs, broker.replica_manager, dying) == 0
    finally:
        dying.shutdown()

    assert log_files(tmp_path / "a") == files_before  # no `.cleaned` left, nothing changed
    assert table(partition) == expected
    assert trio.run(log_maintenance.clean_logs, broker.replica_manager) > 0
    assert table(partition) == expected
    assert len(log_files(tmp_path / "a")) < len(files_before)
    broker.shutdown()
    reopened = Broker.open(build_config({"log.dirs": str(tmp_path / "a")}))
    try:
        assert table(partition_of(reopened)) == expected
    finally:
        reopened.shutdown()


def test_where_no_process_can_start_the_same_cleaning_runs_on_a_thread(
    broker: Broker, monkeypatch
) -> None:
    partition = partition_of(broker)
    expected = table(partition)

    def no_processes(method: str) -> None:
        raise OSError("no processes here")

    monkeypatch.setattr(log_cleaner.multiprocessing, "get_context", no_processes)
    cleaner = LogCleaner()

    assert trio.run(log_maintenance.clean_logs, broker.replica_manager, cleaner) > 0

    assert cleaner.worker_process is False  # this cleaner stays on threads from now on
    assert cleaner.worker_pids() == []
    assert table(partition) == expected
