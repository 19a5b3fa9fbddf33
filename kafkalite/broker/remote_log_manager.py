"""RemoteLogManager (Kafka's): copies closed segments to remote storage, applies retention to
the remote ones and reads them back for consumers' fetches.

Every `remote.log.manager.task.interval.ms`, for each partition this broker leads whose topic
has `remote.storage.enable=true` (Kafka's RLMTask, one pass over them all; a topic that had it
turned off, with `remote.log.delete.on.disable=true`, has its remote segments deleted instead):

1. orphans first: a segment left COPY_SEGMENT_STARTED (a crash or a failed upload) or
   DELETE_SEGMENT_STARTED has its objects deleted, then DELETE_SEGMENT_FINISHED;
2. copy (unless `remote.log.copy.disable`, Kafka 3.9's read-only remote data): each closed
   segment past what was copied and below the high watermark, oldest first:
   COPY_SEGMENT_STARTED (fsynced) -> every object uploaded -> COPY_SEGMENT_FINISHED (fsynced).
   Only then is it served from remote storage, and only then may local retention
   (`local.retention.*`, UnifiedLog.apply_retention) delete the local segment;
3. remote retention: `retention.ms` / `retention.bytes` over the whole log (remote segments
   plus the local ones not yet copied) delete the oldest remote segments.

In a cluster each pass over a partition runs for the leader epoch it started in (Kafka's
RLMTask): its first record is that epoch if the list has not seen it yet, every record is
stamped with it and written only while this broker still leads in it and no newer epoch was
replayed (else the pass stops: LeaderEpochMoved). A copy whose epoch moved during the upload
is abandoned: no COPY_SEGMENT_FINISHED, its objects deleted here, its COPY_SEGMENT_STARTED
left as an orphan for the current leader to delete. A late write that slips past the check
(a paused broker) is ignored by every broker's replay.

The state changes run on the event loop; the metadata file writes and every S3 request run on
worker threads (trio.to_thread), so a slow or unreachable store never stalls the loop. While
the store is unreachable nothing is copied, so nothing un-uploaded is deleted locally; a
warning says so once per outage (and again when it is back).
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed import FetchInfo
from kafkalite.broker.partition import LogReadResult, Partition, RemoteFetch
from kafkalite.broker.remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from kafkalite.config import BrokerConfig
from kafkalite.storage.durable_files import fsync_dir
from kafkalite.storage.leader_epoch import EpochEntry, parse_checkpoint
from kafkalite.storage.producer_state import SNAPSHOT_SUFFIX
from kafkalite.storage.remote import keys
from kafkalite.storage.remote.metadata import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    METADATA_FILE,
    RemoteLogSegmentMetadata,
    RemoteLogSegments,
    event,
    leader_epoch_record,
    stamped,
)
from kafkalite.storage.remote.reader import (
    RemoteReadCache,
    find_offset_by_timestamp,
    read_batches,
)
from kafkalite.storage.remote.s3_storage import (
    RemotePartition,
    RemoteStorageError,
    S3RemoteStorageManager,
    S3Settings,
    SegmentFiles,
)
from kafkalite.storage.segment import LogSegment, segment_paths
from kafkalite.storage.txn_index import AbortedTxn, txn_index_path

log = logging.getLogger("kafkalite.remote")
DELETIONS_DIR = "remote-log-deletions"  # in a log dir: deleted partitions' remote metadata
READ_COMMITTED = 1
_TXN_ENTRY = struct.Struct(">hqqqq")


class LeaderEpochMoved(Exception):
    """This broker no longer leads the partition in the epoch its task started in (Kafka
    cancels the RLM task on leadership loss): the task stops writing for it."""


def _deleted_partition(pending: Path) -> RemotePartition | None:
    """The partition a DELETIONS_DIR entry (`<topic>.<topic id hex>.<partition>`) is of."""
    try:
        topic, topic_hex, index = pending.name.rsplit(".", 2)
        return RemotePartition(topic, uuid.UUID(hex=topic_hex), int(index))
    except ValueError:
        return None


def storage_settings(config: BrokerConfig) -> S3Settings:
    names = [name for name in config.raw if name.startswith("rsm.config.")]
    return S3Settings.from_properties({name: config.str(name) for name in names})


class RemoteLogManager:
    def __init__(
        self,
        config: BrokerConfig,
        partitions: Callable[[], Sequence[Partition]],
        clock_ms: Callable[[], int],
        storage: S3RemoteStorageManager | None = None,
        metadata_manager: TopicBasedRemoteLogMetadataManager | None = None,
    ) -> None:
        self.config = config
        # A cluster: the remote segment lists are replicated through __remote_log_metadata
        # (None: a single node, each list a file in its partition's directory).
        self.metadata_manager = metadata_manager
        self._partitions = partitions  # the partitions this broker has a replica of
        self.clock_ms = clock_ms
        self.storage = storage or S3RemoteStorageManager(storage_settings(config))
        self.cache = RemoteReadCache()
        self.unreachable = False  # the last request to the store failed
        # Kafka's RemoteLogManager metrics, as running totals.
        self.copy_bytes = 0
        self.copy_errors = 0
        self.fetch_bytes = 0
        self.fetch_errors = 0
        # A cluster: the leader epoch each led partition's current pass runs for (Kafka's
        # RLMTask's leader epoch); its records are stamped with it and written only under it.
        self._task_epochs: dict[tuple[uuid.UUID, int], int] = {}
        # Deleted partitions whose remote objects are still to delete: their metadata, kept
        # in each log dir's DELETIONS_DIR until then (a restart resumes them).
        self._deleted: list[Path] = [
            pending
            for log_dir in config.log_dirs
            if (log_dir / DELETIONS_DIR).is_dir()
            for pending in sorted((log_dir / DELETIONS_DIR).iterdir())
            if _deleted_partition(pending) is not None
        ]

    def on_topic_partition_deleted(self, partition: Partition) -> None:
        """DeleteTopics: the partition's remote objects are deleted by the next task run (all
        of them: copied, orphaned and half-deleted segments alike). Its metadata is moved out
        of the partition's directory first, durably, so a broker stopped before then still
        deletes them after its restart.

        In a cluster the controller deletes a topic after moving its replicas offline (no
        leader any more), so every replica holding the replicated list deletes the objects
        (deleting what another replica deleted already is fine)."""
        remote = partition.log.remote
        if remote is None or not (partition.is_leader or remote.sink is not None):
            return
        name = f"{partition.topic}.{partition.topic_id.hex}.{partition.index}"
        pending = partition.log.dir.parent / DELETIONS_DIR / name
        pending.mkdir(parents=True, exist_ok=True)
        if remote.sink is not None:  # replicated: this leader deletes what its list holds
            remote.write_snapshot(pending / METADATA_FILE)
            fsync_dir(pending)
        elif remote.path.exists():
            os.replace(remote.path, pending / remote.path.name)
            fsync_dir(pending)
            fsync_dir(remote.path.parent)
        self._deleted.append(pending)

    # -- the periodic task ------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self.config.int("remote.log.manager.task.interval.ms") / 1000)
            try:
                await self.run_once()
            except Exception:
                log.exception("remote log manager task failed")

    async def run_once(self) -> None:
        await self._delete_deleted_topics()
        failed = succeeded = False  # the store is reachable again only after a clean pass
        for partition in list(self._partitions()):
            remote = partition.log.remote
            if not partition.is_leader or remote is None:
                continue
            if self.metadata_manager is not None and not self.metadata_manager.ready(partition):
                continue  # its list is not read to the end yet since this broker leads it
            self._task_epochs[partition.topic_id, partition.index] = partition.leader_epoch
            try:
                await self._fence_older_epochs(partition, remote)
                if not partition.log.config.remote_storage_enable:
                    await self._delete_all(partition, remote)
                    continue
                await self._delete_orphans(partition, remote)
                if not partition.log.config.remote_log_copy_disable:
                    await self._copy_segments(partition, remote)
                await self._apply_retention(partition, remote)
            except RemoteStorageError as exc:
                self._failed(partition, exc)
                failed = True
                continue
            except LeaderEpochMoved as exc:
                log.info("%s-%d: remote task stopped: %s", partition.topic, partition.index, exc)
                continue
            except FileNotFoundError as exc:  # the partition was deleted meanwhile
                log.info("%s-%d: remote task stopped: %s", partition.topic, partition.index, exc)
                continue
            succeeded = True
        if succeeded and not failed:
            self._reachable()

    async def _delete_deleted_topics(self) -> None:
        while self._deleted:
            pending = self._deleted[0]
            where = _deleted_partition(pending)
            assert where is not None
            remote = RemoteLogSegments.load(pending)
            for metadata in list(remote.segments.values()):
                try:
                    await trio.to_thread.run_sync(
                        self.storage.delete_log_segment_data,
                        where,
                        metadata.start_offset,
                        metadata.segment_id,
                        abandon_on_cancel=True,
                    )
                except RemoteStorageError as exc:
                    log.warning(
                        "%s-%d: deleting remote objects failed: %s",
                        where.topic,
                        where.partition,
                        exc,
                    )
                    return  # tried again next time (deleting what is gone already is fine)
                records = [event(metadata, DELETE_SEGMENT_FINISHED)]
                await trio.to_thread.run_sync(remote.append, records)
                remote.apply(records)
            await trio.to_thread.run_sync(shutil.rmtree, pending, True)
            self._deleted.pop(0)

    def copy_lag_bytes(self) -> int:
        """Kafka's RemoteCopyLagBytes: closed segments of led tiered partitions not yet copied."""
        lag = 0
        for partition in self._partitions():
            remote = partition.log.remote
            copying = partition.log.tiered and not partition.log.config.remote_log_copy_disable
            if partition.is_leader and remote is not None and copying:
                lag += sum(
                    s.size for s in partition.log.segments[:-1] if s.base_offset > remote.copied_end
                )
        return lag

    def remote_log_sizes(self) -> dict[str, tuple[int, int]]:
        """Kafka's RemoteLogSizeBytes and RemoteLogMetadataCount per topic: the bytes and the
        number of the copied remote segments of the tiered partitions this broker leads."""
        sizes: dict[str, tuple[int, int]] = {}
        for partition in self._partitions():
            remote = partition.log.remote
            if partition.is_leader and remote is not None and partition.log.tiered:
                size, count = sizes.get(partition.topic, (0, 0))
                sizes[partition.topic] = (size + remote.size_in_bytes, count + len(remote.copied))
        return sizes

    def _failed(self, partition: Partition, exc: RemoteStorageError) -> None:
        if not self.unreachable:
            log.warning(
                "%s-%d: remote storage failed (%s); local segments are kept until uploaded,"
                " retrying every %d ms",
                partition.topic,
                partition.index,
                exc,
                self.config.int("remote.log.manager.task.interval.ms"),
            )
        self.unreachable = True

    def _reachable(self) -> None:
        if self.unreachable:
            log.info("remote storage reachable again; uploads resume")
        self.unreachable = False

    @staticmethod
    def _remote_partition(partition: Partition) -> RemotePartition:
        return RemotePartition(partition.topic, partition.topic_id, partition.index)

    def _task_epoch(self, partition: Partition) -> int:
        return self._task_epochs[partition.topic_id, partition.index]

    def _check_epoch(self, partition: Partition, remote: RemoteLogSegments) -> None:
        """Still the leader of the task's epoch, and no newer leader's record replayed."""
        epoch = self._task_epoch(partition)
        if not partition.is_leader or partition.leader_epoch != epoch:
            raise LeaderEpochMoved(f"leader epoch {epoch} is over (now {partition.leader_epoch})")
        if remote.leader_epoch > epoch:
            raise LeaderEpochMoved(f"leader epoch {epoch} fenced by {remote.leader_epoch}")

    async def _fence_older_epochs(self, partition: Partition, remote: RemoteLogSegments) -> None:
        """A new leader's first record: its epoch, so that every broker's replay ignores a
        deposed leader's writes from now on, whatever this leader writes next."""
        if self.metadata_manager is not None and remote.leader_epoch < partition.leader_epoch:
            await self._durable(partition, remote, [leader_epoch_record(partition.leader_epoch)])

    async def _durable(
        self, partition: Partition, remote: RemoteLogSegments, records: list[dict[str, object]]
    ) -> None:
        """Make state changes durable: the metadata file (a worker thread), or in a cluster
        the metadata topic (acks=all, then consumed back: in effect on return), stamped with
        the task's leader epoch, written only while this broker leads in it, and raising
        LeaderEpochMoved if a newer leader's records fenced them."""
        if self.metadata_manager is None:
            await trio.to_thread.run_sync(remote.append, records)
            return
        self._check_epoch(partition, remote)
        user = self.metadata_manager.user(partition)
        await self.metadata_manager.publish(user, stamped(records, self._task_epoch(partition)))
        self._check_epoch(partition, remote)

    async def _record(
        self, partition: Partition, remote: RemoteLogSegments, records: list[dict[str, object]]
    ) -> None:
        """Durable first, then in effect (applying a change twice changes nothing). In a
        cluster only the replay applies them: the same on every broker."""
        await self._durable(partition, remote, records)
        if self.metadata_manager is None:
            remote.apply(records)

    # -- orphans and deletion ---------------------------------------------------------------

    async def _delete_all(self, partition: Partition, remote: RemoteLogSegments) -> None:
        """remote.storage.enable turned off (with remote.log.delete.on.disable, Kafka 3.9):
        every remote segment deleted, then the metadata; a crash in between resumes here."""
        for metadata in list(remote.segments.values()):
            await self._delete_segment(partition, remote, metadata)
        if partition.log.remote is remote:
            partition.log.drop_remote()
            log.info(
                "%s-%d: remote storage turned off: remote segments deleted",
                partition.topic,
                partition.index,
            )

    async def _delete_orphans(self, partition: Partition, remote: RemoteLogSegments) -> None:
        for metadata in remote.orphans:
            await self._delete_segment(partition, remote, metadata)

    async def _delete_segment(
        self, partition: Partition, remote: RemoteLogSegments, metadata: RemoteLogSegmentMetadata
    ) -> None:
        if metadata.state != DELETE_SEGMENT_STARTED:
            if self.metadata_manager is None:  # not served from now on (a cluster: replayed)
                remote.apply([event(metadata, DELETE_SEGMENT_STARTED)])
            await self._durable(partition, remote, [event(metadata, DELETE_SEGMENT_STARTED)])
        await trio.to_thread.run_sync(
            self.storage.delete_log_segment_data,
            self._remote_partition(partition),
            metadata.start_offset,
            metadata.segment_id,
            abandon_on_cancel=True,  # a shutdown does not wait for the store: done again
        )
        await self._record(partition, remote, [event(metadata, DELETE_SEGMENT_FINISHED)])

    # -- copying ----------------------------------------------------------------------------

    def copy_candidates(self, partition: Partition, remote: RemoteLogSegments) -> list[LogSegment]:
        """Closed segments past the copied end whose records are all below the high
        watermark (Kafka copies up to the last stable offset: no open transaction here).
        A new leader's segments need not start where the old leader's did: the one holding
        the copied end is copied whole (overlapping, as Kafka does), so nothing is skipped."""
        upper = min(partition.high_watermark, partition.last_stable_offset)
        return [
            segment
            for segment in partition.log.segments[:-1]
            if segment.next_offset - 1 > remote.copied_end
            and segment.size > 0
            and segment.next_offset <= upper
        ]

    async def _copy_segments(self, partition: Partition, remote: RemoteLogSegments) -> None:
        for segment in self.copy_candidates(partition, remote):
            if partition.log.remote is not remote or not partition.is_leader:
                return  # deleted or no longer led meanwhile
            await self._copy_segment(partition, remote, segment)

    async def _copy_segment(
        self, partition: Partition, remote: RemoteLogSegments, segment: LogSegment
    ) -> None:
        log_ = partition.log
        end_offset = segment.next_offset - 1
        files = self._segment_files(log_.dir, segment)
        epochs = [
            entry for entry in log_.leader_epoch_cache.entries if entry.start_offset <= end_offset
        ]
        objects = self._in_memory_objects(log_.dir, segment, epochs)
        metadata = RemoteLogSegmentMetadata(
            segment_id=uuid.uuid4(),
            start_offset=segment.base_offset,
            end_offset=end_offset,
            max_timestamp_ms=segment.max_timestamp,
            broker_id=self.config.broker_id,
            event_timestamp_ms=self.clock_ms(),
            segment_size_in_bytes=segment.size,
            segment_leader_epochs=tuple((e.epoch, e.start_offset) for e in epochs),
            suffixes=(*files, *objects),
            state=COPY_SEGMENT_STARTED,
        )
        await self._record(partition, remote, [event(metadata, COPY_SEGMENT_STARTED)])
        try:
            await trio.to_thread.run_sync(
                self.storage.copy_log_segment_data,
                self._remote_partition(partition),
                segment.base_offset,
                metadata.segment_id,
                SegmentFiles(files, objects),
                segment.size,
                abandon_on_cancel=True,  # a shutdown does not wait: an orphan, copied again
            )
        except RemoteStorageError:
            self.copy_errors += 1
            raise  # left COPY_SEGMENT_STARTED: an orphan, deleted and copied again later
        if self.metadata_manager is not None:
            await self._abandon_if_deposed(partition, remote, metadata)
        elif not partition.is_leader:
            return  # the new leader deletes it as an orphan and copies the segment again
        await self._record(partition, remote, [event(metadata, COPY_SEGMENT_FINISHED)])
        self.copy_bytes += segment.size
        log.info(
            "%s-%d: copied segment %d-%d (%d bytes) to remote storage as %s",
            partition.topic,
            partition.index,
            segment.base_offset,
            end_offset,
            segment.size,
            keys.kafka_uuid(metadata.segment_id),
        )

    async def _abandon_if_deposed(
        self, partition: Partition, remote: RemoteLogSegments, metadata: RemoteLogSegmentMetadata
    ) -> None:
        """The leader epoch moved during the upload: COPY_SEGMENT_FINISHED is not written.
        The segment stays COPY_SEGMENT_STARTED in the list, an orphan the current leader
        deletes; its objects are deleted here too, as they may be uploaded after that."""
        try:
            self._check_epoch(partition, remote)
        except LeaderEpochMoved:
            log.info(
                "%s-%d: copy of segment %d-%d abandoned: the leader epoch moved during it",
                partition.topic,
                partition.index,
                metadata.start_offset,
                metadata.end_offset,
            )
            await trio.to_thread.run_sync(
                self.storage.delete_log_segment_data,
                self._remote_partition(partition),
                metadata.start_offset,
                metadata.segment_id,
                abandon_on_cancel=True,
            )
            raise

    @staticmethod
    def _segment_files(dir: Path, segment: LogSegment) -> dict[str, Path]:
        log_path, index_path, time_index_path = segment_paths(dir, segment.base_offset)
        files = {
            keys.LOG: log_path,
            keys.OFFSET_INDEX: index_path,
            keys.TIME_INDEX: time_index_path,
        }
        txn = txn_index_path(dir, segment.base_offset)
        if txn.exists():
            files[keys.TXN_INDEX] = txn
        return files

    @staticmethod
    def _in_memory_objects(
        dir: Path, segment: LogSegment, epochs: list[EpochEntry]
    ) -> dict[str, bytes]:
        """The leader epochs the segment spans, and the producer snapshot at its end if the
        broker still keeps it: read now, as a later roll may prune it (a small file)."""
        data = {keys.LEADER_EPOCH: _epoch_checkpoint(epochs)}
        try:
            snapshot = dir / f"{segment.next_offset:020d}{SNAPSHOT_SUFFIX}"
            data[keys.PRODUCER_SNAPSHOT] = snapshot.read_bytes()
        except FileNotFoundError:
            pass
        return data

    # -- remote retention -------------------------------------------------------------------

    def expired_segments(
        self, partition: Partition, remote: RemoteLogSegments
    ) -> list[RemoteLogSegmentMetadata]:
        """Remote segments past retention.ms or retention.bytes of the whole log, oldest
        first (Kafka's RLMExpirationTask)."""
        config = partition.log.config
        copied = remote.copied
        expired: list[RemoteLogSegmentMetadata] = list(remote.below_log_start)
        if config.retention_ms >= 0:
            now = self.clock_ms()
            for metadata in copied:
                if now - metadata.max_timestamp_ms <= config.retention_ms:
                    break
                expired.append(metadata)
        if config.retention_bytes >= 0:
            local_only = sum(
                s.size for s in partition.log.segments if s.base_offset > remote.copied_end
            )
            excess = remote.size_in_bytes + local_only - config.retention_bytes
            for metadata in copied:
                if excess - metadata.segment_size_in_bytes < 0:
                    break
                excess -= metadata.segment_size_in_bytes
                if metadata not in expired:
                    expired.append(metadata)
        return expired

    async def _apply_retention(self, partition: Partition, remote: RemoteLogSegments) -> None:
        """Delete the expired remote segments; the log start follows (Kafka's
        updateLogStartOffsetFromRemoteTier), so local copies of them go too."""
        for metadata in self.expired_segments(partition, remote):
            log.info(
                "%s-%d: deleting remote segment %d-%d past retention",
                partition.topic,
                partition.index,
                metadata.start_offset,
                metadata.end_offset,
            )
            await self._delete_segment(partition, remote, metadata)
            if partition.log.remote is remote and metadata.end_offset >= remote.log_start_floor:
                partition.log.delete_records_before(metadata.end_offset + 1)

    # -- reading ----------------------------------------------------------------------------

    async def read_remote(
        self,
        infos: Sequence[FetchInfo],
        results: Sequence[LogReadResult],
        partition_of: Callable[[tuple[str, int]], Partition | None],
    ) -> list[LogReadResult]:
        """Fill in the records of the first partition a fetch reads from remote storage
        (as Kafka, one per request: the others answer empty and are fetched again), within
        remote.fetch.max.wait.ms (past it: empty, the read's bytes are cached for the retry)."""
        answered = list(results)
        done = False
        for i, (info, result) in enumerate(zip(infos, results, strict=True)):
            if result.remote_fetch is None:
                continue
            partition = partition_of(info.tp)
            if done or partition is None:
                answered[i] = replace(result, remote_fetch=None)
                continue
            done = True
            answered[i] = await self._read_one(partition, result, result.remote_fetch)
        return answered

    async def _read_one(
        self, partition: Partition, result: LogReadResult, fetch: RemoteFetch
    ) -> LogReadResult:
        remote = partition.log.remote
        metadata = remote.segment_for(fetch.fetch_offset) if remote is not None else None
        if metadata is None:
            return LogReadResult(ErrorCode.offset_out_of_range)
        where = self._remote_partition(partition)
        fetcher = partial(self._fetch_object, where, metadata)
        read = partial(
            read_batches,
            metadata,
            fetcher,
            self.cache,
            fetch.fetch_offset,
            fetch.max_bytes,
            fetch.max_offset,
            fetch.min_one_batch,
        )
        records = b""
        aborted: tuple[AbortedTxn, ...] | None = None
        try:
            with trio.move_on_after(self.config.int("remote.fetch.max.wait.ms") / 1000):
                records = await trio.to_thread.run_sync(read, abandon_on_cancel=True)
                if fetch.isolation_level == READ_COMMITTED:
                    aborted = await trio.to_thread.run_sync(
                        self._aborted, metadata, fetcher, fetch.fetch_offset, abandon_on_cancel=True
                    )
        except RemoteStorageError as exc:
            self.fetch_errors += 1
            log.warning("%s-%d: remote read failed: %s", partition.topic, partition.index, exc)
            return LogReadResult(ErrorCode.kafka_storage_error)
        self.fetch_bytes += len(records)
        if not records:
            aborted = None
        return replace(
            result,
            records=records,
            remote_fetch=None,
            aborted_transactions=aborted if aborted is not None else result.aborted_transactions,
        )

    async def find_offset_by_timestamp(
        self, partition: Partition, timestamp: int
    ) -> tuple[int, int, int] | None:
        """ListOffsets by timestamp in the remote tier (Kafka's RemoteLogManager
        .findOffsetByTimestamp): (offset, timestamp, epoch), or None to look locally."""
        start = partition.remote_log_start_offset
        where = self._remote_partition(partition)
        for metadata in partition.remote_segments_for_timestamp(timestamp):
            fetcher = partial(self._fetch_object, where, metadata)
            found = await trio.to_thread.run_sync(
                find_offset_by_timestamp, metadata, fetcher, self.cache, timestamp, start or 0
            )
            if found is not None:
                return found
        return None

    async def build_remote_log_aux_state(
        self, partition: Partition, leader_local_start: int
    ) -> bool:
        """Kafka's ReplicaFetcherTierStateMachine for a follower answered
        OFFSET_MOVED_TO_TIERED_STORAGE: from the replicated metadata, the remote segment
        ending just before the leader's local log start; its uploaded leader epoch checkpoint
        and producer snapshot become this replica's, and its log starts empty after it.
        False (back off, as Kafka retries) while that segment is not known here yet."""
        remote = partition.log.remote
        metadata = remote.segment_for(leader_local_start - 1) if remote is not None else None
        if metadata is None or metadata.start_offset > leader_local_start - 1:
            log.info(
                "%s-%d: no remote segment holds %d yet: cannot start at the leader's local"
                " log start",
                partition.topic,
                partition.index,
                leader_local_start - 1,
            )
            return False
        where = self._remote_partition(partition)
        epoch = partition.leader_epoch
        objects: dict[str, bytes] = {}
        try:
            for suffix in (keys.LEADER_EPOCH, keys.PRODUCER_SNAPSHOT):
                if suffix in metadata.suffixes:
                    objects[suffix] = await trio.to_thread.run_sync(
                        self._fetch_object, where, metadata, suffix, 0, None
                    )
        except RemoteStorageError as exc:
            self.fetch_errors += 1
            log.warning("%s-%d: remote read failed: %s", partition.topic, partition.index, exc)
            return False
        if partition.is_leader or partition.leader_epoch != epoch:
            return False  # its state moved on during the reads: never truncate a leader
        epochs = (
            parse_checkpoint(objects[keys.LEADER_EPOCH]) if keys.LEADER_EPOCH in objects else []
        )
        next_offset = metadata.end_offset + 1
        partition.truncate_fully_and_restore_remote_aux_state(
            next_offset, epochs, objects.get(keys.PRODUCER_SNAPSHOT)
        )
        log.info(
            "%s-%d: starting at %d after remote segment %s (%d leader epochs, producer"
            " snapshot: %s)",
            partition.topic,
            partition.index,
            next_offset,
            keys.kafka_uuid(metadata.segment_id),
            len(epochs),
            keys.PRODUCER_SNAPSHOT in objects,
        )
        return True

    def _fetch_object(
        self,
        where: RemotePartition,
        metadata: RemoteLogSegmentMetadata,
        suffix: str,
        start: int,
        end: int | None,
    ) -> bytes:
        return self.storage.fetch(
            where, metadata.start_offset, metadata.segment_id, suffix, start, end
        )

    def _aborted(
        self,
        metadata: RemoteLogSegmentMetadata,
        fetcher: Callable[[str, int, int | None], bytes],
        fetch_offset: int,
    ) -> tuple[AbortedTxn, ...]:
        """The segment's aborted transactions ending at or after the fetch offset (its
        uploaded `.txnindex`; none uploaded: none aborted)."""
        if keys.TXN_INDEX not in metadata.suffixes:
            return ()
        data = self.cache.get(
            (metadata.segment_id, keys.TXN_INDEX), lambda: fetcher(keys.TXN_INDEX, 0, None)
        )
        usable = len(data) - len(data) % _TXN_ENTRY.size
        entries = [
            AbortedTxn(*_TXN_ENTRY.unpack_from(data, pos)[1:])
            for pos in range(0, usable, _TXN_ENTRY.size)
        ]
        return tuple(entry for entry in entries if entry.last_offset >= fetch_offset)


def _epoch_checkpoint(entries: list[EpochEntry]) -> bytes:
    """The leader epoch checkpoint file's format (storage/leader_epoch.py)."""
    lines = ["0", str(len(entries))] + [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode()
