"""Creating partitions costs the fsyncs durability needs and no more (issue 21, point 2): an
empty partition's files and its leader epoch checkpoint become durable with its first flush
of data; the log dir is synced once per batch of new partitions."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest
import trio
from batches import Record, make_batch

from kafkalite.broker import log_maintenance
from kafkalite.broker.broker import Broker
from kafkalite.broker.metadata_store import METADATA_FILE
from kafkalite.config import build_config
from kafkalite.storage.leader_epoch import CHECKPOINT_FILE


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """What was fsynced: the path of every file or directory, counted."""
    paths: Counter[str] = Counter()
    real = os.fsync

    def fsync(fd: int) -> None:
        paths[os.readlink(f"/proc/self/fd/{fd}")] += 1
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


def test_twenty_new_partitions_cost_three_fsyncs(tmp_path: Path, fsynced: Counter[str]) -> None:
    broker = Broker.open(build_config({"log.dirs": str(tmp_path)}))
    try:
        fsynced.clear()
        assert broker.admin_manager.create_topic("t", 20, 1, {})[0].ok
        manager = broker.replica_manager.log_manager.managers[0]
        trio.run(log_maintenance.run_disk_work, manager)
        # The topic's metadata file and its directory (the log dir), then the log dir once
        # more for all twenty partition directories.
        assert fsynced == {str(tmp_path / f"{METADATA_FILE}.tmp"): 1, str(tmp_path): 2}
        epochs = [(tmp_path / f"t-{p}" / CHECKPOINT_FILE).read_text() for p in range(20)]
        assert epochs == ["0\n1\n0 0\n"] * 20  # written once, by the leader's election
    finally:
        broker.shutdown()


def test_the_first_flush_makes_the_partition_and_its_epochs_durable(
    tmp_path: Path, fsynced: Counter[str]
) -> None:
    broker = Broker.open(build_config({"log.dirs": str(tmp_path)}))
    try:
        assert broker.admin_manager.create_topic("t", 1, 1, {})[0].ok
        partition = broker.replica_manager.partition("t", 0)
        assert partition is not None
        batch = make_batch([Record(key=b"k", value=b"v")], base_timestamp=time.time_ns() // 10**6)
        results, _ = broker.replica_manager.append_records({("t", 0): batch}, 1)
        assert results[("t", 0)].error == 0
        fsynced.clear()
        partition.log.flush()
        partition_dir = tmp_path / "t-0"
        assert fsynced[str(partition_dir / CHECKPOINT_FILE)] == 1
        assert fsynced[str(partition_dir)] == 1
        assert fsynced[str(partition_dir / "00000000000000000000.log")] == 1
        fsynced.clear()
        partition.log.flush()  # nothing new: nothing to sync
        assert sum(fsynced.values()) == 0
    finally:
        broker.shutdown()
