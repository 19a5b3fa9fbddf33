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
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.storage import disk_health
from kafkalite.storage.durable_files import fsync_dir, write_atomically
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log import LogConfig, UnifiedLog

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


@dataclass(eq=False)
class LogManager:
    log_dir: Path
    logs: dict[TopicPartition, UnifiedLog] = field(default_factory=dict)
    had_clean_shutdown: bool = False
    _last_checkpoint: tuple[dict, dict] | None = field(default=None, repr=False)
    # Per compacted log, where its last cleaning stopped (Kafka's LogCleanerManager state).
    cleaner_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    _uncleanable: set[TopicPartition] = field(default_factory=set, repr=False)

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
        # A crash before the next clean stop must not look clean.
        clean_file.unlink(missing_ok=True)
        return self.logs

    def create_log(self, topic: str, partition: int, config: LogConfig, now_ms: int) -> UnifiedLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        created = UnifiedLog.open(self.log_dir / f"{topic}-{partition}", config, now_ms=now_ms)
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
        fsync_dir(self.log_dir)
        if existing is not None:
            existing.dir = doomed
            existing.delete()
        else:
            shutil.rmtree(doomed, ignore_errors=True)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write the recovery point and log start offset checkpoints atomically.

        Skipped when nothing changed since the last write: each write costs two fsyncs.
        """
        recovery = {tp: log.recovery_point for tp, log in self.logs.items()}
        starts = {tp: log.log_start_offset for tp, log in self.logs.items()}
        if (recovery, starts) == self._last_checkpoint:
            return
        try:
            write_checkpoint(self.log_dir / RECOVERY_POINT_CHECKPOINT, recovery)
            write_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT, starts)
        except OSError as exc:  # e.g. a full disk: logged once, retried on the next call
            disk_health.write_failed(self.log_dir, exc)
            return
        self._last_checkpoint = (recovery, starts)

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
        for tp, partition_log in self.logs.items():
            if "compact" not in partition_log.config.cleanup_policy or tp in self._uncleanable:
                continue
            high_watermark = high_watermarks.get(tp) if high_watermarks is not None else None
            try:
                result = partition_log.compact(
                    now_ms,
                    self.cleaner_offsets.get(tp),
                    high_watermark=high_watermark,
                    min_dirty_ratio=partition_log.config.min_cleanable_dirty_ratio,
                )
            except StorageError:
                log.exception("%s: cleaning failed; not cleaning it again", partition_log.dir)
                self._uncleanable.add(tp)
                continue
            if result is not None:
                reclaimed += result.bytes_reclaimed
                changed |= self.cleaner_offsets.get(tp) != result.first_dirty_offset
                self.cleaner_offsets[tp] = result.first_dirty_offset
        if changed:
            self._write_cleaner_offsets()
        return reclaimed

    def _write_cleaner_offsets(self) -> None:
        offsets = {tp: offset for tp, offset in self.cleaner_offsets.items() if tp in self.logs}
        write_checkpoint(self.log_dir / CLEANER_OFFSET_CHECKPOINT, offsets)

    def shutdown(self) -> None:
        """Close every log, checkpoint, then mark the shutdown clean."""
        for partition_log in self.logs.values():
            partition_log.close()
        self.checkpoint()
        write_atomically(self.log_dir / CLEAN_SHUTDOWN_FILE, '{"version":0,"brokerEpoch":-1}')
