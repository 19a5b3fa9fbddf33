"""LogDirs: the log directories of `log.dirs` (JBOD), one LogManager each, as Kafka's LogManager
spreads partitions over its `liveLogDirs`.

A new partition goes to the directory holding the fewest partitions (the first of equals), as
Kafka's nextLogDirs picks it; a restart finds each partition wherever it is. A partition found
in two directories refuses the start, as Kafka does. Every other operation is its LogManager's,
per directory.

`move_log` (AlterReplicaLogDirs) copies a partition to another directory as
`<topic>-<partition>.<uuid>-future`, renames the source to its `-delete` name, then the copy to
`<topic>-<partition>`; each step is durable, and `load` finishes or discards a move a crash
interrupted: a future copy whose source is gone becomes the log, one whose source is still
there is removed. The move is synchronous (Kafka copies in a background thread while the
source keeps serving).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage.durable_files import fsync_dir
from kafkalite.storage.errors import KafkaStorageError
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.log_cleaner import LogCleaner
from kafkalite.storage.log_manager import LogManager, TopicPartition, parse_partition_dir

log = logging.getLogger("kafkalite.storage")

_FUTURE_DIR = re.compile(r"(?P<name>.+-\d+)\.[0-9a-f]{32}-future")


class DuplicateLogError(ValueError):
    """A partition is in two log directories: which one is current cannot be told."""


@dataclass(eq=False)
class LogDirs:
    managers: list[LogManager]
    cleaner: LogCleaner = field(default_factory=LogCleaner)  # where the broker's cleanings run

    @classmethod
    def for_dirs(cls, dirs: Sequence[Path], background_io: bool = False) -> LogDirs:
        """`background_io`: disk work left to worker threads (broker/log_maintenance.py)."""
        return cls([LogManager(Path(d), background_io=background_io) for d in dirs])

    @property
    def dirs(self) -> list[Path]:
        return [manager.log_dir for manager in self.managers]

    @property
    def logs(self) -> Mapping[TopicPartition, UnifiedLog]:
        return ChainMap(*(manager.logs for manager in self.managers))

    def manager_of(self, tp: TopicPartition) -> LogManager | None:
        return next((m for m in self.managers if tp in m.logs), None)

    def manager_for_dir(self, path: str | Path) -> LogManager | None:
        wanted = Path(path).absolute()
        return next((m for m in self.managers if m.log_dir.absolute() == wanted), None)

    # -- lifecycle -------------------------------------------------------------------------

    def load(
        self, configs: Callable[[str, int], LogConfig], now_ms: int
    ) -> Mapping[TopicPartition, UnifiedLog]:
        for manager in self.managers:
            manager.log_dir.mkdir(parents=True, exist_ok=True)
        self._finish_interrupted_moves()
        found: dict[TopicPartition, Path] = {}
        for manager in self.managers:
            for tp in manager.load(configs, now_ms):
                if tp in found:
                    raise DuplicateLogError(
                        f"duplicate log directories for {tp[0]}-{tp[1]} are found in both "
                        f"{found[tp]} and {manager.log_dir}"
                    )
                found[tp] = manager.log_dir
        return self.logs

    def _finish_interrupted_moves(self) -> None:
        current = {
            entry.name
            for manager in self.managers
            for entry in manager.log_dir.iterdir()
            if entry.is_dir() and parse_partition_dir(entry.name) is not None
        }
        for manager in self.managers:
            for entry in sorted(manager.log_dir.iterdir()):
                match = _FUTURE_DIR.fullmatch(entry.name)
                if match is None:
                    continue
                if match["name"] in current:
                    log.info("removing the copy of an interrupted move %s", entry)
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    log.info("finishing the interrupted move of %s", entry)
                    entry.rename(manager.log_dir / match["name"])
                    fsync_dir(manager.log_dir)
                    current.add(match["name"])

    def create_log(self, topic: str, partition: int, config: LogConfig, now_ms: int) -> UnifiedLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        emptiest = min(self.managers, key=lambda m: len(m.logs))  # min keeps the first of equals
        return emptiest.create_log(topic, partition, config, now_ms)

    def delete_log(self, topic: str, partition: int) -> None:
        manager = self.manager_of((topic, partition))
        if manager is not None:
            manager.delete_log(topic, partition)

    def move_log(self, tp: TopicPartition, destination: LogManager, now_ms: int) -> UnifiedLog:
        """Move a partition's log to another directory; returns the log reopened there."""
        source = self.manager_of(tp)
        if source is None:
            raise KeyError(tp)
        current = source.logs[tp]
        if source is destination:
            return current
        name = f"{tp[0]}-{tp[1]}"
        future = destination.log_dir / f"{name}.{uuid.uuid4().hex}-future"
        current.close()
        try:
            shutil.copytree(current.dir, future)
            _fsync_tree(future)
            fsync_dir(destination.log_dir)
        except OSError as exc:
            shutil.rmtree(future, ignore_errors=True)
            raise KafkaStorageError(f"cannot copy {current.dir} to {future}: {exc}") from exc
        recovery_point, log_start = current.recovery_point, current.log_start_offset
        source.delete_log(*tp)  # renamed to -delete, then removed
        final = destination.log_dir / name
        future.rename(final)
        fsync_dir(destination.log_dir)
        moved = UnifiedLog.open(
            final,
            current.config,
            recovery_point=recovery_point,
            log_start_offset=log_start,
            now_ms=now_ms,
        )
        moved.background_io = destination.background_io
        destination.logs[tp] = moved
        destination.checkpoint()
        return moved

    # -- per directory ---------------------------------------------------------------------

    def checkpoint(self) -> None:
        for manager in self.managers:
            manager.checkpoint()

    def flush_all(self, now_ms: int) -> None:
        for manager in self.managers:
            manager.flush_all(now_ms)

    def apply_retention(
        self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> int:
        return sum(manager.apply_retention(now_ms, high_watermarks) for manager in self.managers)

    def clean_logs(
        self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> int:
        return sum(manager.clean_logs(now_ms, high_watermarks) for manager in self.managers)

    def shutdown(self) -> None:
        self.cleaner.shutdown()
        for manager in self.managers:
            manager.shutdown()


def _fsync_tree(root: Path) -> None:
    for path in root.iterdir():
        if path.is_dir():  # a partition's delay store (broker/delayed_delivery_store.py)
            _fsync_tree(path)
            continue
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    fsync_dir(root)
