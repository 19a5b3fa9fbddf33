"""LogManager: every partition log in one log directory, as Kafka's LogManager.

Partition directories are `<topic>-<partition>`. Recovery points, log start offsets and the
cleaner's first dirty offsets live in Kafka's checkpoint files in the log dir;
`.kafka_cleanshutdown` marks a clean stop.
Deleted partitions are first renamed to `<topic>-<partition>.<uuid>-delete` so a crash
mid-removal leaves a leftover that the next load removes, never a half-deleted log.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage import disk_health
from kafkalite.storage.cleaner import Cleanable, CleanResult
from kafkalite.storage.durable_files import fsync_dir, write_atomically
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log import DiskWork, LogConfig, UnifiedLog

log = logging.getLogger("kafkalite.storage")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)")
_DELETE_DIR = re.compile(r".+-\d+\.[0-9a-f]{32}-delete")

TopicPartition = tuple[str, int]


def parse_partition_dir(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> (topic, partition); the partition follows the last '-'."""
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    return match["topic"], int(match["partition"])


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Kafka's offset checkpoint file: version, count, then `topic partition offset` lines."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        lines = data.decode("utf-8").splitlines()
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        offsets = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            offsets[(topic, int(partition))] = int(offset)
        if len(offsets) != count:
            raise ValueError(f"expected {count} entries, found {len(offsets)}")
        return offsets
    except (ValueError, IndexError) as exc:  # UnicodeDecodeError is a ValueError
        log.warning("%s is malformed (%s); ignoring it, as if it were missing", path, exc)
        return {}


def write_checkpoint(path: Path, offsets: dict[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    write_atomically(path, "\n".join(lines) + "\n")


@dataclass(frozen=True, slots=True)
class CheckpointState:
    seq: int
    recovery_points: dict[TopicPartition, int]
    start_offsets: dict[TopicPartition, int]


@dataclass(eq=False)
class DirRemoval:
    """Worker-side directory work (as DiskWork): remove a deleted log's `-delete` directory,
    or (remove=False) fsync the log dir after partition directories were created."""

    manager: LogManager
    path: Path
    remove: bool = True

    def run(self) -> None:
        if self.remove:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            fsync_dir(self.path)

    def finish(self) -> None:
        pass

    def retry_later(self) -> None:
        if self.remove:
            self.manager._doomed_dirs.append(self.path)
        else:
            self.manager._log_dir_dirty = True


@dataclass(eq=False)
class LogManager:
    log_dir: Path
    logs: dict[TopicPartition, UnifiedLog] = field(default_factory=dict)
    had_clean_shutdown: bool = False
    _last_checkpoint: tuple[dict, dict] | None = field(default=None, repr=False)
    # Per compacted log, where its last cleaning stopped (Kafka's LogCleanerManager state).
    cleaner_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    _uncleanable: set[TopicPartition] = field(default_factory=set, repr=False)
    # The broker sets this: logs leave roll fsyncs and file removals to take_disk_work.
    background_io: bool = False
    _checkpoint_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _checkpoint_seq: int = 0  # snapshots are numbered so an older one never overwrites a newer
    _written_seq: int = 0
    _doomed_dirs: list[Path] = field(default_factory=list, repr=False)
    _log_dir_dirty: bool = False  # partition dirs created since the last fsync of the log dir

    def __post_init__(self) -> None:
        self.log_dir = Path(self.log_dir)

    def load(
        self, configs: Callable[[str, int], LogConfig], now_ms: int
    ) -> dict[TopicPartition, UnifiedLog]:
        """Open every partition log in the directory (recovering what needs it)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        clean_file = self.log_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = clean_file.exists()
        recovery_points = read_checkpoint(self.log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT)
        self.cleaner_offsets = read_checkpoint(self.log_dir / CLEANER_OFFSET_CHECKPOINT)
        for entry in sorted(self.log_dir.iterdir()):
            if not entry.is_dir():
                continue
            if _DELETE_DIR.fullmatch(entry.name):
                log.info("removing leftover deleted log %s", entry)
                shutil.rmtree(entry, ignore_errors=True)
                continue
            tp = parse_partition_dir(entry.name)
            if tp is None:
                continue
            self.logs[tp] = UnifiedLog.open(
                entry,
                configs(*tp),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                now_ms=now_ms,
            )
            self.logs[tp].background_io = self.background_io
        # A crash before the next clean stop must not look clean.
        clean_file.unlink(missing_ok=True)
        return self.logs

    def create_log(self, topic: str, partition: int, config: LogConfig, now_ms: int) -> UnifiedLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        created = UnifiedLog.open(self.log_dir / f"{topic}-{partition}", config, now_ms=now_ms)
        created.background_io = self.background_io
        if self.background_io:
            # One directory fsync by the disk worker for many new partitions (as for a
            # roll's new segment, data not yet fsynced is what a power loss may take).
            self._log_dir_dirty = True
        else:
            fsync_dir(self.log_dir)
        self.logs[(topic, partition)] = created
        return created

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename to `<topic>-<partition>.<uuid>-delete` (durably), then remove it."""
        existing = self.logs.pop((topic, partition), None)
        if self.cleaner_offsets.pop((topic, partition), None) is not None:
            self._write_cleaner_offsets()
        self._uncleanable.discard((topic, partition))
        path = self.log_dir / f"{topic}-{partition}"
        if not path.exists():  # removed behind our back: still release its files
            if existing is not None:
                existing.close()
            return
        doomed = path.with_name(f"{topic}-{partition}.{uuid.uuid4().hex}-delete")
        os.rename(path, doomed)
        if existing is not None:
            existing.dir = doomed
        if self.background_io:
            # The rest waits for a worker (take_disk_work): a crash before it leaves either
            # the renamed dir, removed on load, or the old one, whose topic is gone from the
            # metadata, so the broker deletes it on load.
            if existing is not None:
                for segment in existing.segments:
                    segment.close_files()
            self._doomed_dirs.append(doomed)
            return
        fsync_dir(self.log_dir)
        if existing is not None:
            existing.delete()
        else:
            shutil.rmtree(doomed, ignore_errors=True)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write the recovery point and log start offset checkpoints atomically.

        Skipped when nothing changed since the last write: each write costs two fsyncs.
        """
        state = self.checkpoint_state()
        if state is not None:
            self.write_checkpoints(state)

    def checkpoint_state(self) -> CheckpointState | None:
        """A snapshot for write_checkpoints (which may run on a worker thread); None when
        nothing changed since the last write."""
        recovery = {tp: log.recovery_point for tp, log in self.logs.items()}
        starts = {tp: log.log_start_offset for tp, log in self.logs.items()}
        if (recovery, starts) == self._last_checkpoint:
            return None
        self._checkpoint_seq += 1
        return CheckpointState(self._checkpoint_seq, recovery, starts)

    def write_checkpoints(self, state: CheckpointState) -> None:
        with self._checkpoint_lock:
            if state.seq <= self._written_seq:
                return  # a newer snapshot was written meanwhile
            try:
                write_checkpoint(self.log_dir / RECOVERY_POINT_CHECKPOINT, state.recovery_points)
                write_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT, state.start_offsets)
            except OSError as exc:  # e.g. a full disk: logged once, retried on the next call
                disk_health.write_failed(self.log_dir, exc)
                return
            self._written_seq = state.seq
            self._last_checkpoint = (state.recovery_points, state.start_offsets)

    def take_disk_work(self) -> list[DiskWork | DirRemoval]:
        """Every log's pending roll fsyncs and file removals (see UnifiedLog.take_disk_work),
        and the directories of deleted logs."""
        work: list[DiskWork | DirRemoval] = [DirRemoval(self, path) for path in self._doomed_dirs]
        self._doomed_dirs = []
        if self._log_dir_dirty:
            self._log_dir_dirty = False
            work.append(DirRemoval(self, self.log_dir, remove=False))
        for partition_log in self.logs.values():
            item = partition_log.take_disk_work()
            if item is not None:
                work.append(item)
        return work

    def flush_all(self, now_ms: int) -> None:
        for partition_log in self.logs.values():
            partition_log.maybe_flush(now_ms)

    def apply_retention(
        self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> int:
        """Retention on every log (and producer id expiration); segments deleted.

        No segment holding offsets at or above its log's high watermark (default: the log
        end) is deleted, as in Kafka's deleteOldSegments.
        """
        deleted = 0
        for tp, partition_log in self.logs.items():
            high_watermark = high_watermarks.get(tp) if high_watermarks is not None else None
            deleted += partition_log.apply_retention(now_ms, high_watermark)
            partition_log.remove_expired_producers(now_ms)
        return deleted

    def clean_logs(
        self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> int:
        """Compact every log whose cleanup.policy has "compact" and whose dirty ratio reached
        min.cleanable.dirty.ratio; returns the bytes reclaimed.

        `high_watermarks` bounds what each log's cleaning may rely on (default: the log end).
        A log whose cleaning fails is logged and left alone until restart, as Kafka marks it
        uncleanable. Synchronous: call it where nothing else touches the logs meanwhile.
        """
        reclaimed = 0
        changed = False
        for tp in self.cleanable_logs():
            high_watermark = high_watermarks.get(tp) if high_watermarks is not None else None
            cleanable = self.plan_cleaning(tp, now_ms, high_watermark)
            if cleanable is None:
                continue
            try:
                result = self.logs[tp].clean(cleanable, now_ms)
            except StorageError:
                self.cleaning_failed(tp)
                continue
            reclaimed += result.bytes_reclaimed
            changed |= self.cleaning_done(tp, result)
        if changed:
            self._write_cleaner_offsets()
        return reclaimed

    def cleanable_logs(self) -> list[TopicPartition]:
        return [
            tp
            for tp, partition_log in self.logs.items()
            if partition_log.config.compacted and tp not in self._uncleanable
        ]

    def plan_cleaning(
        self, tp: TopicPartition, now_ms: int, high_watermark: int | None
    ) -> Cleanable | None:
        partition_log = self.logs[tp]
        return partition_log.plan_compaction(
            now_ms,
            self.cleaner_offsets.get(tp),
            high_watermark=high_watermark,
            min_dirty_ratio=partition_log.config.min_cleanable_dirty_ratio,
        )

    def cleaning_done(self, tp: TopicPartition, result: CleanResult) -> bool:
        """Remember where the next cleaning starts; True if that changed."""
        changed = self.cleaner_offsets.get(tp) != result.first_dirty_offset
        self.cleaner_offsets[tp] = result.first_dirty_offset
        return changed

    def cleaning_failed(self, tp: TopicPartition) -> None:
        """Call from an except block: logs the error; the log is not cleaned again (Kafka
        marks it uncleanable) until restart."""
        log.exception("%s: cleaning failed; not cleaning it again", self.logs[tp].dir)
        self._uncleanable.add(tp)

    def cleaner_offsets_state(self) -> dict[TopicPartition, int]:
        """A snapshot for write_cleaner_offsets (which may run on a worker thread)."""
        return {tp: offset for tp, offset in self.cleaner_offsets.items() if tp in self.logs}

    def write_cleaner_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        with self._checkpoint_lock:
            write_checkpoint(self.log_dir / CLEANER_OFFSET_CHECKPOINT, offsets)

    def _write_cleaner_offsets(self) -> None:
        self.write_cleaner_offsets(self.cleaner_offsets_state())

    def shutdown(self) -> None:
        """Close every log, checkpoint, then mark the shutdown clean."""
        for work in self.take_disk_work():
            work.run()
            work.finish()
        for partition_log in self.logs.values():
            partition_log.close()
        self.checkpoint()
        write_atomically(self.log_dir / CLEAN_SHUTDOWN_FILE, '{"version":0,"brokerEpoch":-1}')
