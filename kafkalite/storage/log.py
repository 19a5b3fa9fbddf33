"""UnifiedLog: one partition's log, a sequence of LogSegments in a directory.

Mirrors Kafka's UnifiedLog/LocalLog/LogLoader: appends as leader (validate, producer
checks, roll, assign offsets, write, index), reads whole batches, recovers everything
after the recovery point on open, and enforces retention. Synchronous and sans-trio.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.config import DEFAULT_RETENTION_MS
from kafkalite.storage import disk_health
from kafkalite.storage.batch import (
    BatchHeader,
    InvalidBatch,
    assign_offsets,
    batch_views,
    parse_header,
    validate_batches,
)
from kafkalite.storage.cleaner import (
    Cleanable,
    CleanedSegments,
    CleanJob,
    CleanResult,
    SegmentInfo,
    clean_segments,
    find_cleanable,
)
from kafkalite.storage.control_batch import EndTxnMarker, decode_marker, encode_marker
from kafkalite.storage.durable_files import fsync_dir, fsync_file, replace_unsynced
from kafkalite.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordError,
    RecordListTooLargeError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
    from_invalid_batch,
)
from kafkalite.storage.leader_epoch import EpochEntry, LeaderEpochCache
from kafkalite.storage.offset_metadata import LogOffsetMetadata
from kafkalite.storage.producer_state import SNAPSHOT_SUFFIX, BatchMetadata, ProducerStateManager
from kafkalite.storage.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, decode_records, recompress
from kafkalite.storage.remote.metadata import (
    METADATA_FILE,
    RemoteLogSegments,
    log_start_record,
)
from kafkalite.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    HEADER_INDEX_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    header_index_path,
    scan_headers,
    segment_paths,
)
from kafkalite.storage.txn_index import (
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    append_entry,
    read_entries,
    rewrite,
    rewrite_atomically,
    txn_index_path,
)

log = logging.getLogger("kafkalite.storage")

LONG_MAX = 2**63 - 1
LOG_APPEND_TIME = "LogAppendTime"
TOPIC_CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
TEMPORARY_SUFFIXES = (".tmp", DELETED_SUFFIX, CLEANED_SUFFIX)
OFFSET_METADATA_CACHE_SIZE = 64


def _always(_segment: LogSegment, _next: LogSegment | None) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = DEFAULT_RETENTION_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit (per partition)
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588  # largest batch (framing included)
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    flush_messages: int = LONG_MAX  # fsync after this many records
    flush_ms: int = LONG_MAX  # fsync when the last flush is older
    producer_id_expiration_ms: int = 86_400_000
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes: roll when an index fills
    cleanup_policy: str = "delete"  # "compact" alone disables time/size retention
    # The topic's compression.type: "producer" keeps each batch's codec, a codec name (or
    # "uncompressed") makes the broker rewrite batches that use another one.
    compression_type: str = "producer"
    # CreateTime bounds around the broker's clock (Kafka 4 defaults: any past, 1 h ahead).
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    delete_retention_ms: int = 86_400_000  # how long the cleaner keeps tombstones
    min_cleanable_dirty_ratio: float = 0.5  # clean once dirty bytes / cleanable bytes reach it
    min_compaction_lag_ms: int = 0  # segments with newer records are not cleaned yet
    # kafkalite.index.headers: headers a view's read finds per batch in a header index
    # (storage/header_index.py), comma-separated.
    index_headers: str = ""
    # Tiered storage (storage/remote/): segments are uploaded, and local ones are deleted
    # only once uploaded and past local retention (-2: retention.ms/bytes).
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    # Kafka 3.9: no more uploads, local data expires by retention.* (the remote stays
    # readable); and remote.storage.enable turned off deletes the remote data.
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        if self.local_retention_bytes == -2:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy


@dataclass(frozen=True, slots=True)
class AppendResult:
    first_offset: int  # base offset of the first batch (original offsets for a duplicate)
    last_offset: int
    log_append_time_ms: int  # -1 with CreateTime
    log_start_offset: int
    duplicate: bool = False


@dataclass(eq=False)
class UnifiedLog:
    dir: Path
    config: LogConfig
    log_start_offset: int
    recovery_point: int
    leader_epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    segments: list[LogSegment] = field(default_factory=list, repr=False)
    _now_ms: int = 0  # latest time a caller gave us, stamps flushes
    _last_flush_ms: int = 0
    _dir_dirty: bool = False  # a segment file was created since the last directory fsync
    # A new log's directory entries: made durable by its first flush of data, not before
    # (lost, the broker creates the log again; nothing in it depends on them until then).
    _new_entries_unsynced: bool = False
    _bases: list[int] = field(default_factory=list, repr=False)
    _bases_key: tuple[int, int, int] | None = None
    # Set by the broker: a roll's fsync and the removal of deleted segments' files wait for
    # `take_disk_work` (run on a worker thread) instead of stalling the append.
    background_io: bool = False
    cleaning: bool = False  # a cleaner works on the segments: no segment is deleted meanwhile
    _roll_flush_offset: int | None = None
    _doomed: list[LogSegment] = field(default_factory=list, repr=False)
    # Aborted transactions (the `.txnindex` files' entries), by abort marker offset.
    aborted_txns: list[AbortedTxn] = field(default_factory=list, repr=False)
    # Positions of offsets below the log end that parked fetches asked for (high watermark,
    # last stable offset, fetch offsets); dropped when batches move.
    _offset_metadata: dict[int, LogOffsetMetadata] = field(default_factory=dict, repr=False)
    # Tiered storage: the segments copied to remote storage (remote.storage.enable only).
    remote: RemoteLogSegments | None = field(default=None, repr=False)
    _kept_for_upload: int = -1  # the last segment retention kept because not yet uploaded

    # ---- opening and loading ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        now_ms: int,
    ) -> UnifiedLog:
        dir = Path(dir)
        new = not dir.exists()
        dir.mkdir(parents=True, exist_ok=True)
        _prepare_files(dir)
        self = cls(
            dir,
            config,
            log_start_offset,
            recovery_point,
            LeaderEpochCache.load(dir),
            ProducerStateManager(dir, config.producer_id_expiration_ms),
            _now_ms=now_ms,
            _last_flush_ms=now_ms,
        )
        self.segments = [self._open_segment(base, now_ms) for base in _segment_bases(dir)]
        if not self.segments:
            self.segments.append(self._open_segment(log_start_offset, now_ms))
        self._recover(recovery_point)
        self._finish_load(now_ms)
        self._new_entries_unsynced = new
        self._load_remote()
        return self

    def _load_remote(self) -> None:
        # With remote storage turned off the metadata is kept (and loaded) until the
        # RemoteLogManager has deleted the remote segments (remote.log.delete.on.disable).
        if self.remote is None and (
            self.config.remote_storage_enable or (self.dir / METADATA_FILE).exists()
        ):
            self.remote = RemoteLogSegments.load(self.dir)

    def drop_remote(self) -> None:
        """Remote storage turned off and every remote segment deleted: the log is a local
        log again, its metadata file gone."""
        if self.remote is not None:
            self.remote.path.unlink(missing_ok=True)
            self.remote = None

    def _open_segment(self, base_offset: int, now_ms: int, suffix: str = "") -> LogSegment:
        return LogSegment.open(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=now_ms,
            suffix=suffix,
        )

    def _recover(self, recovery_point: int) -> None:
        """Validate every segment from the one holding the recovery point to the end.

        Earlier segments are only recovered if an index needs rebuilding. After the first
        segment that had to be truncated, all later segments are deleted, as Kafka does.
        """
        cache = self.leader_epoch_cache
        first_unflushed = self._segment_index(recovery_point)
        if not cache.loaded_ok:
            cache.clear()
            for segment in self.segments[:first_unflushed]:
                for _, header in scan_headers(segment.fd, 0, segment.size):
                    _maybe_assign_epoch(cache, header)

        def on_batch(header: BatchHeader) -> None:
            _maybe_assign_epoch(cache, header)

        for i, segment in enumerate(self.segments):
            if i < first_unflushed and not segment.needs_recovery:
                continue
            # Resume mid-segment only when the epoch cache needs nothing from the prefix.
            resume = recovery_point if i == first_unflushed and cache.loaded_ok else None
            truncated = segment.recover(self.config.max_message_bytes, on_batch, resume)
            if truncated:
                log.warning(
                    "%s: truncated %d invalid bytes from segment %d, log end now %d",
                    self.dir,
                    truncated,
                    segment.base_offset,
                    segment.next_offset,
                )
                self._delete_segments_after(i)
                break

    def _delete_segments_after(self, index: int) -> None:
        for segment in self.segments[index + 1 :]:
            log.warning("%s: deleting segment %d after corruption", self.dir, segment.base_offset)
            segment.delete()
        del self.segments[index + 1 :]

    def _finish_load(self, now_ms: int) -> None:
        leo = self.log_end_offset
        if leo < self.log_start_offset:
            log.warning(
                "%s: log end %d below log start %d; starting empty at the log start",
                self.dir,
                leo,
                self.log_start_offset,
            )
            self._truncate_fully_and_start_at(self.log_start_offset, now_ms)
            leo = self.log_end_offset
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.recovery_point = min(self.recovery_point, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        if not self.leader_epoch_cache.loaded_ok:
            if leo > self.log_start_offset:  # rebuilt: a restart need not scan the log again
                self.leader_epoch_cache.flush()
            self.leader_epoch_cache.loaded_ok = True
        self._load_producer_state(now_ms)

    def _load_producer_state(self, now_ms: int) -> None:
        """Newest snapshot <= log end, then replay batch headers up to the log end."""
        state = self.producer_state
        leo = self.log_end_offset
        snapshot = state.load_latest_snapshot(leo, now_ms)
        start = max(snapshot if snapshot is not None else 0, self.segments[0].base_offset)
        self._load_txn_index()
        indexed = {entry.last_offset for entry in self.aborted_txns}
        for segment, position, header in self._iter_positions(start):
            if header.is_control and header.has_producer_id and header.last_offset not in indexed:
                marker = decode_marker(segment.read_batch(position, header))
                if marker is not None and not marker.commit:
                    self._index_abort(header.producer_id, header.base_offset, segment.base_offset)
            state.replay(header)
        state.map_end_offset = leo
        state.remove_expired(now_ms)

    def _iter_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of every batch ending at or after `from_offset`, in log order."""
        for _, _, header in self._iter_positions(from_offset):
            yield header

    def _iter_positions(self, from_offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        for segment in self.segments[self._segment_index(from_offset) :]:
            start = segment.offset_index.lookup(from_offset)
            for position, header in scan_headers(segment.fd, start, segment.size):
                if header.last_offset >= from_offset:
                    yield segment, position, header

    # ---- transactions ----------------------------------------------------------------------

    def _load_txn_index(self) -> None:
        """Every `.txnindex` entry still inside the log; files holding entries past the log
        end (a truncated tail) are rewritten without them."""
        leo, entries = self.log_end_offset, []
        for path in sorted(self.dir.glob("*" + TXN_INDEX_SUFFIX)):
            found = read_entries(path)
            kept = [e for e in found if self.log_start_offset <= e.last_offset < leo]
            if len(kept) != len(found) and path.stem.isdigit():
                rewrite(self.dir, int(path.stem), kept)
            entries.extend(kept)
        self.aborted_txns = sorted(entries, key=lambda entry: entry.last_offset)

    def _index_abort(self, producer_id: int, marker_offset: int, segment_base: int) -> None:
        entry = self.producer_state.last_entry(producer_id)
        if entry is None or entry.current_txn_first_offset < 0:
            return  # nothing of this transaction reached this partition
        # Kafka's ProducerStateManager.lastStableOffset(completedTxn): where the next other
        # open transaction starts, else just after this marker.
        others = [
            other.current_txn_first_offset
            for other in self.producer_state.producers.values()
            if other.producer_id != producer_id and other.current_txn_first_offset >= 0
        ]
        aborted = AbortedTxn(
            producer_id,
            entry.current_txn_first_offset,
            marker_offset,
            min(others, default=marker_offset + 1),
        )
        append_entry(self.dir, segment_base, aborted)
        self.aborted_txns.append(aborted)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTxnMarker,
        leader_epoch: int,
        now_ms: int,
    ) -> int:
        """Write a transaction's commit/abort marker (Kafka's appendAsLeader with
        origin COORDINATOR); completes the producer's open transaction here and indexes an
        abort. Returns the marker's offset; raises InvalidProducerEpochError for an epoch
        older than the producer's, TransactionCoordinatorFencedError for an older
        coordinator epoch."""
        self._now_ms = now_ms
        entry = self.producer_state.last_entry(producer_id)
        if entry is not None and producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than "
                f"the last seen epoch {entry.producer_epoch}"
            )
        if entry is not None and marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Coordinator epoch {marker.coordinator_epoch} of the marker for producer "
                f"{producer_id} is older than {entry.coordinator_epoch}"
            )
        records = encode_marker(producer_id, producer_epoch, marker, now_ms)
        offset = self.log_end_offset
        buffer = bytearray(records)
        patched = assign_offsets(buffer, [parse_header(records)], offset, leader_epoch)
        try:
            self._maybe_roll(len(records), now_ms, offset, now_ms)
            self.active_segment.append(buffer, patched)
        except OSError as exc:
            disk_health.write_failed(self.dir.parent, exc)
            raise KafkaStorageError(f"append to {self.dir} failed: {exc}") from exc
        disk_health.write_succeeded(self.dir.parent)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, offset)
        if not marker.commit:
            self._index_abort(producer_id, offset, self.active_segment.base_offset)
        self.producer_state.complete_txn(patched[0], marker.coordinator_epoch)
        return offset

    def collect_aborted(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_offset) (Kafka's
        collectAbortedTransactions)."""
        return [
            entry
            for entry in self.aborted_txns
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_offset
        ]

    # ---- properties ------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.active_segment
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where `offset` sits (Kafka's convertToOffsetMetadataOrThrow): the log end costs
        nothing; another offset is found by its batch header once, then cached until a
        truncation or a cleaned segment moves batches. Offset only when out of range."""
        if offset >= self.log_end_offset:
            return self.log_end_offset_metadata
        if offset < self.log_start_offset:
            return LogOffsetMetadata(offset)
        cached = self._offset_metadata.get(offset)
        if cached is not None:
            return cached
        segment = self.segments[self._segment_index(offset)]
        found = LogOffsetMetadata(offset, segment.base_offset, segment.batch_position(offset))
        if len(self._offset_metadata) >= OFFSET_METADATA_CACHE_SIZE:
            self._offset_metadata.clear()
        self._offset_metadata[offset] = found
        return found

    def segments_from(self, offset: int) -> list[LogSegment]:
        """The segments from the one holding `offset` (or the first) to the active one."""
        return self.segments[self._segment_index(offset) :]

    def _segment_index(self, offset: int) -> int:
        """Index of the segment whose range holds `offset` (the first one if below all)."""
        return max(bisect_right(self._segment_bases(), offset) - 1, 0)

    def _segment_bases(self) -> list[int]:
        """Base offsets, cached. Segments only ever change by dropping a prefix or suffix or
        appending, so (count, first base, last base) identifies the list's contents."""
        segments = self.segments
        key = (len(segments), segments[0].base_offset, segments[-1].base_offset)
        if key != self._bases_key:
            self._bases = [segment.base_offset for segment in segments]
            self._bases_key = key
        return self._bases

    # ---- append ----------------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes, leader_epoch: int, now_ms: int, *, coordinator: bool = False
    ) -> AppendResult:
        """Append a producer's batches atomically; raises a StorageError on rejection.

        `coordinator`: Kafka's AppendOrigin.COORDINATOR, a coordinator writing for a
        producer (transactional offset commits): no sequence numbers to check."""
        self._now_ms = now_ms
        headers = self._validate(records, coordinator)
        records, headers = self._apply_topic_compression(records, headers)
        first_offset = self.log_end_offset
        append_time = now_ms if self.config.message_timestamp_type == LOG_APPEND_TIME else None
        pending = self.producer_state.prepare(
            headers, first_offset, append_time, check_sequence=not coordinator
        )
        if pending.duplicate is not None:
            return self._duplicate_result(pending.duplicate)
        count = sum(header.last_offset_delta + 1 for header in headers)
        last_offset = first_offset + count - 1
        max_timestamp = (
            append_time if append_time is not None else max(h.max_timestamp for h in headers)
        )
        buffer = bytearray(records)
        patched = assign_offsets(buffer, headers, first_offset, leader_epoch, append_time)
        if leader_epoch >= 0:
            self._assign_epochs(lambda: self.leader_epoch_cache.assign(leader_epoch, first_offset))
        self._write(buffer, patched, max_timestamp, last_offset, now_ms)
        self.producer_state.commit(pending, last_offset + 1)
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendResult(
            first_offset,
            last_offset,
            append_time if append_time is not None else -1,
            self.log_start_offset,
        )

    def append_as_follower(self, records: bytes, now_ms: int) -> int:
        """Kafka's appendAsFollower: the leader's batches written unchanged (its offsets,
        leader epochs and timestamps); the epoch cache and producer state follow them as
        recovery does, so a follower that becomes leader still deduplicates retries.
        Returns the new log end offset; raises a StorageError on rejection."""
        self._now_ms = now_ms
        if not records:
            return self.log_end_offset
        try:
            headers = validate_batches(records, self.config.max_message_bytes)
        except InvalidBatch as exc:
            raise from_invalid_batch(exc) from exc
        expected = self.log_end_offset
        for header in headers:
            if header.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"{self.dir}: replicated batch at {header.base_offset}, log end is {expected}"
                )
            expected = header.next_offset
        max_timestamp = max(header.max_timestamp for header in headers)
        cache = self.leader_epoch_cache
        self._assign_epochs(lambda: [_maybe_assign_epoch(cache, header) for header in headers])
        self._write(bytearray(records), headers, max_timestamp, headers[-1].last_offset, now_ms)
        position = 0
        for header in headers:
            if header.is_control and header.has_producer_id:
                batch = memoryview(records)[position : position + header.size]
                self._index_replicated_abort(batch, header)
            self.producer_state.replay(header)
            position += header.size
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return self.log_end_offset

    def _index_replicated_abort(self, batch: memoryview, header: BatchHeader) -> None:
        """An abort marker from the leader is indexed here too (Kafka's follower append
        completes transactions as the leader's does): a follower that becomes leader answers
        read_committed fetches with the aborted transactions, not the aborted records."""
        marker = decode_marker(batch)
        if marker is not None and not marker.commit:
            self._index_abort(
                header.producer_id, header.base_offset, self.active_segment.base_offset
            )

    def _assign_epochs(self, assign: Callable[[], object]) -> None:
        """Update the leader epoch cache (its checkpoint file) before the batches are written,
        as Kafka's append does: a full disk then fails the append with nothing written. After
        the write, the producer would be told a written batch failed and its idempotent retry
        would be written twice."""
        try:
            assign()
        except OSError as exc:
            disk_health.write_failed(self.dir.parent, exc)
            raise KafkaStorageError(f"leader epoch checkpoint of {self.dir} failed: {exc}") from exc

    def _write(
        self,
        buffer: bytearray,
        headers: list[BatchHeader],
        max_timestamp: int,
        last_offset: int,
        now_ms: int,
    ) -> None:
        """Roll if due, then write batches whose offsets are assigned (leader or follower)."""
        try:
            self._maybe_roll(len(buffer), max_timestamp, last_offset, now_ms)
            self.active_segment.append(buffer, headers)
        except OSError as exc:
            disk_health.write_failed(self.dir.parent, exc)
            raise KafkaStorageError(f"append to {self.dir} failed: {exc}") from exc
        disk_health.write_succeeded(self.dir.parent)

    def _validate(self, records: bytes, coordinator: bool = False) -> list[BatchHeader]:
        if not records:  # Kafka's ProduceRequest.validateRecords: INVALID_RECORD
            raise InvalidRecordError("Produce requests must have at least one record batch")
        try:
            headers = validate_batches(records, self.config.max_message_bytes)
        except InvalidBatch as exc:
            raise from_invalid_batch(exc) from exc
        if len(records) > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"Message batch size is {len(records)} bytes in append, which exceeds the "
                f"maximum configured segment size of {self.config.segment_bytes}"
            )
        for header in headers:
            if not coordinator:
                _validate_client_batch(header)
        batches = list(zip(batch_views(records, headers), headers, strict=True))
        if self.config.message_timestamp_type != LOG_APPEND_TIME:
            for batch, header in batches:
                self._validate_timestamps(batch, header)
        if self.config.compacted:
            for batch, header in batches:
                if not header.is_control:
                    self._require_keys(batch)
        return headers

    def _apply_topic_compression(
        self, records: bytes, headers: list[BatchHeader]
    ) -> tuple[bytes, list[BatchHeader]]:
        """Batches are stored as sent unless the topic names another codec (the only case
        where the broker recompresses, as Kafka's LogValidator does)."""
        codec = TOPIC_CODECS.get(self.config.compression_type)
        if codec is None or all(h.compression == codec for h in headers):
            return records, headers
        batches = [
            recompress(batch, header, codec)
            for batch, header in zip(batch_views(records, headers), headers, strict=True)
        ]
        largest = max(len(batch) for batch in batches)
        if largest > self.config.max_message_bytes:
            raise from_invalid_batch(
                InvalidBatch(
                    "too_large",
                    f"recompressed batch of {largest} bytes exceeds "
                    f"{self.config.max_message_bytes}",
                )
            )
        return b"".join(batches), [parse_header(batch) for batch in batches]

    def _require_keys(self, batch: memoryview) -> None:
        """Compaction keeps the latest record per key, so a keyless record has no place in
        a compacted log (Kafka's LogValidator; the only path here that decodes records).
        Each keyless record is named, so clients fail those and not the whole batch."""
        message = (
            f"Compacted topic cannot accept message without key in topic partition {self.dir.name}"
        )
        keyless = [
            RecordError(index, message)
            for index, record in enumerate(decode_records(batch))
            if record.key is None
        ]
        if keyless:
            raise InvalidRecordError.rejecting(keyless)

    def _validate_timestamps(self, batch: memoryview, header: BatchHeader) -> None:
        """Kafka's LogValidator.validateTimestamp. The batch's bounds (its first record's
        timestamp, usually the earliest, and its max timestamp) are checked without decoding;
        when one is out of range the records are decoded to name each offending one."""
        low = self._now_ms - self.config.message_timestamp_before_max_ms
        high = self._now_ms + self.config.message_timestamp_after_max_ms
        bounds = (header.base_timestamp, header.max_timestamp)
        if all(timestamp < 0 or low <= timestamp <= high for timestamp in bounds):
            return
        rejected = [
            RecordError(
                index,
                f"Timestamp {record.timestamp} of message with offset {record.offset} is out of "
                f"range. The timestamp should be within [{low}, {high}]",
            )
            for index, record in enumerate(decode_records(batch))
            if record.timestamp >= 0 and not low <= record.timestamp <= high
        ]
        if rejected:
            raise InvalidTimestampError.rejecting(rejected)

    def _duplicate_result(self, duplicate: BatchMetadata) -> AppendResult:
        log_append_time = (
            duplicate.timestamp if self.config.message_timestamp_type == LOG_APPEND_TIME else -1
        )
        return AppendResult(
            duplicate.first_offset,
            duplicate.last_offset,
            log_append_time,
            self.log_start_offset,
            duplicate=True,
        )

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int, now_ms: int) -> None:
        """Kafka's shouldRoll: size, segment.ms age, full indexes, or offsets out of range."""
        segment, config = self.active_segment, self.config
        if (
            segment.size > config.segment_bytes - size
            or (
                segment.size > 0
                and segment.time_waited_for_roll(now_ms, max_timestamp) > config.segment_ms
            )
            or segment.indexes_full
            or not segment.can_hold_offset(last_offset)
        ):
            self.roll(now_ms)

    def roll(self, now_ms: int) -> None:
        """Start a new active segment at the log end; the old one is flushed (as Kafka), at
        once or, with background_io, by the worker that runs `take_disk_work`."""
        self._now_ms = now_ms
        old = self.active_segment
        if old.size == 0:
            return
        new_base = self.log_end_offset
        old.on_become_inactive()
        self.producer_state.map_end_offset = new_base
        self.producer_state.take_snapshot()
        self.segments.append(self._open_segment(new_base, now_ms))
        self._dir_dirty = True
        if self.background_io:
            self._roll_flush_offset = new_base  # as Kafka's scheduled "flush-log" task
        else:
            self._flush_upto(new_base)

    # ---- read ------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True
    ) -> bytes:
        """Whole batches from the one holding `offset`, all below `max_offset`."""
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range [{self.log_start_offset}, {leo}] for {self.dir}"
            )
        index = self._segment_index(offset)
        while index < len(self.segments) and offset < min(leo, max_offset):
            segment = self.segments[index]
            data = segment.read(offset, max_bytes, max_offset, min_one_batch)
            if data:
                return data
            index += 1
            if index < len(self.segments):
                offset = max(offset, self.segments[index].base_offset)
        return b""

    # ---- timestamps and epochs -------------------------------------------------------------

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the first record with timestamp >= `timestamp`."""
        for segment in self.segments:
            if segment.size == 0 or segment.max_timestamp < timestamp:
                continue
            if segment.next_offset <= self.log_start_offset:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the record holding the log's largest timestamp."""
        candidates = [segment for segment in self.segments if segment.size > 0]
        if not candidates:
            return None
        best = candidates[0]
        for segment in candidates[1:]:
            if segment.max_timestamp > best.max_timestamp:
                best = segment
        return best.max_timestamp_entry()

    def epoch_for_offset(self, offset: int) -> int:
        """Leader epoch of the batch holding `offset`; without one (e.g. the log end), the
        epoch cache's answer, as Kafka's epochForOffset. -1 when unknown."""
        found = None
        if self.log_start_offset <= offset < self.log_end_offset:
            found = self.segments[self._segment_index(offset)].find_batch(offset)
        if found is not None and found[1].partition_leader_epoch >= 0:
            return found[1].partition_leader_epoch
        return self.leader_epoch_cache.epoch_for_offset(offset)

    # ---- deletion and retention ------------------------------------------------------------

    def delete_records_before(self, offset: int, *, across_tiers: bool = True) -> int:
        """DeleteRecords: move the log start forward (never back), drop segments below it.
        Tiered: the remote log start too (durably; the RemoteLogManager deletes the remote
        segments wholly below it), unless `across_tiers` is False: a follower following
        the leader's local log start (the remote start reaches it through the replicated
        remote segment list)."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: log end offset is {self.log_end_offset}"
            )
        if across_tiers:
            self._raise_remote_log_start(offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
        self._delete_old_segments(self._below_log_start, self.log_end_offset)
        return self.log_start_offset

    def _raise_remote_log_start(self, offset: int) -> None:
        """Tiered: the log start across tiers moves to `offset`, durably; the
        RemoteLogManager deletes the remote segments wholly below it."""
        remote = self.remote
        if self.tiered and remote is not None and offset > remote.log_start_floor:
            record = [log_start_record(offset)]
            remote.append(record)  # one small fsynced write (DeleteRecords and retention)
            remote.apply(record)

    def apply_retention(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Kafka's deleteOldSegments: log start, size and time retention, in that order.

        Segments at or beyond `high_watermark` (default: the log end) are never deleted.
        """
        self._now_ms = now_ms
        high_watermark = self.log_end_offset if high_watermark is None else high_watermark
        deleted = self._delete_old_segments(self._below_log_start, high_watermark)
        if "delete" not in self.config.cleanup_policy:
            return deleted
        if self.tiered:
            return deleted + self._apply_local_retention(now_ms, high_watermark)
        deleted += self._delete_by_size(high_watermark, self.config.retention_bytes)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda segment, _next: now_ms - segment.largest_timestamp() > retention_ms,
                high_watermark,
            )
        return deleted

    @property
    def tiered(self) -> bool:
        return self.config.remote_storage_enable and self.remote is not None

    def _apply_local_retention(self, now_ms: int, high_watermark: int) -> int:
        """Tiered storage: a local segment goes once it is uploaded AND past local retention
        (Kafka's deleteOldSegments with remote storage); retention.ms/bytes over the whole
        log are the RemoteLogManager's, on the remote segments.

        With remote.log.copy.disable nothing is uploaded any more: local segments expire by
        retention.ms/bytes, and the log start across tiers follows them (Kafka moves the log
        start offset, so the older remote segments go too)."""
        config = self.config
        copying = not config.remote_log_copy_disable
        retention_ms = config.effective_local_retention_ms if copying else config.retention_ms
        retention_bytes = (
            config.effective_local_retention_bytes if copying else config.retention_bytes
        )
        allowed = self._uploaded if copying else _always
        deleted = self._delete_by_size(high_watermark, retention_bytes, allowed)
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda segment, _next: (
                    now_ms - segment.largest_timestamp() > retention_ms and allowed(segment, _next)
                ),
                high_watermark,
            )
        if deleted and not copying:
            self._raise_remote_log_start(self.log_start_offset)
        return deleted

    def _uploaded(self, segment: LogSegment, _next: LogSegment | None) -> bool:
        assert self.remote is not None
        if segment.next_offset - 1 <= self.remote.copied_end:
            return True
        if _next is None:
            return False  # the active segment: never uploaded, never deleted
        if self._kept_for_upload != segment.base_offset:  # said once per segment
            self._kept_for_upload = segment.base_offset
            # INFO: between a roll and the next upload this is routine; an unreachable store
            # is the RemoteLogManager's warning.
            log.info(
                "%s: segment %d is past local retention but not yet in remote storage: kept",
                self.dir,
                segment.base_offset,
            )
        return False

    def _below_log_start(self, segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= self.log_start_offset

    def _delete_by_size(
        self,
        high_watermark: int,
        retention_bytes: int,
        allowed: Callable[[LogSegment, LogSegment | None], bool] = _always,
    ) -> int:
        size = self.size_in_bytes
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        excess = size - retention_bytes

        def should_delete(segment: LogSegment, _next: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0 and allowed(segment, _next):
                excess -= segment.size
                return True
            return False

        return self._delete_old_segments(should_delete, high_watermark)

    def _delete_old_segments(
        self,
        predicate: Callable[[LogSegment, LogSegment | None], bool],
        high_watermark: int,
    ) -> int:
        """Delete the oldest segments while `predicate` holds; roll first if all would go."""
        if self.cleaning:  # the cleaner reads them; the next retention check deletes them
            return 0
        deletable = self._deletable_segments(predicate, high_watermark)
        if not deletable:
            return 0
        if len(deletable) == len(self.segments):
            self.roll(self._now_ms)
        for segment in deletable:
            log.info("%s: deleting segment %d", self.dir, segment.base_offset)
            self._remove_segment(segment)
            txn_index_path(self.dir, segment.base_offset).unlink(missing_ok=True)
        del self.segments[: len(deletable)]
        if self.segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self.segments[0].base_offset
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        start = self.log_start_offset
        self.aborted_txns = [e for e in self.aborted_txns if e.last_offset >= start]
        return len(deletable)

    def _deletable_segments(
        self,
        predicate: Callable[[LogSegment, LogSegment | None], bool],
        high_watermark: int,
    ) -> list[LogSegment]:
        deletable = []
        for i, segment in enumerate(self.segments):
            next_segment = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = next_segment.base_offset if next_segment else self.log_end_offset
            last_and_empty = next_segment is None and segment.size == 0
            if last_and_empty or high_watermark < upper or not predicate(segment, next_segment):
                break
            deletable.append(segment)
        return deletable

    def _remove_segment(self, segment: LogSegment) -> None:
        """Delete now, or (background_io) rename to `.deleted` as Kafka's asyncDeleteSegment
        and leave the unlinking, slow for large files, to `take_disk_work`."""
        if not self.background_io:
            segment.delete()
            return
        segment.change_suffix(DELETED_SUFFIX)
        segment.close_files()
        self._doomed.append(segment)

    def take_disk_work(self) -> DiskWork | None:
        """The pending roll fsyncs and file removals, for a worker thread (see DiskWork)."""
        offset, self._roll_flush_offset = self._roll_flush_offset, None
        flush: list[LogSegment] = []
        if offset is not None and offset > self.recovery_point:
            start = self._segment_index(self.recovery_point)
            flush = [s for s in self.segments[start:] if s.base_offset < offset]
        else:
            offset = None
        sync_epochs = bool(flush) and self.leader_epoch_cache.take_unsynced()
        flush_dir = self._dir_dirty or (bool(flush) and self._take_new_entries()) or sync_epochs
        if not flush and not flush_dir and not self._doomed:
            return None
        work = DiskWork(self, flush, flush_dir, offset, self._doomed, sync_epochs)
        self._dir_dirty, self._doomed = False, []
        return work

    def _take_new_entries(self) -> bool:
        new, self._new_entries_unsynced = self._new_entries_unsynced, False
        return new

    def remove_expired_producers(self, now_ms: int) -> int:
        return self.producer_state.remove_expired(now_ms)

    # ---- compaction ------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction: nothing from it on may be cleaned."""
        starts = [
            entry.current_txn_first_offset
            for entry in self.producer_state.producers.values()
            if entry.current_txn_first_offset >= 0
        ]
        return min(starts, default=None)

    def compact(
        self,
        now_ms: int,
        first_dirty_offset: int | None = None,
        *,
        high_watermark: int | None = None,
        min_dirty_ratio: float = 0.0,
    ) -> CleanResult | None:
        """Clean the segments below the active one in this thread (see cleaner.py; the broker
        cleans in a worker process: broker/log_maintenance.py).

        `first_dirty_offset` is where the last cleaning stopped (default: the log start).
        None when no cleanable segment is dirty or the dirty ratio (dirty bytes over the
        cleanable segments' bytes) is below `min_dirty_ratio`; otherwise the result's
        `first_dirty_offset` is the value to checkpoint for the next call.
        """
        cleanable = self.plan_compaction(
            now_ms,
            first_dirty_offset,
            high_watermark=high_watermark,
            min_dirty_ratio=min_dirty_ratio,
        )
        return None if cleanable is None else self.clean(cleanable, now_ms)

    def clean(self, cleanable: Cleanable, now_ms: int) -> CleanResult:
        """Clean what `plan_compaction` planned, in this thread."""
        segments = self.segments[: cleanable.segment_count]
        cleaned = clean_segments(self.clean_job(cleanable, segments, now_ms))
        return self.swap_cleaned(cleanable, segments, cleaned, now_ms)

    def plan_compaction(
        self,
        now_ms: int,
        first_dirty_offset: int | None = None,
        *,
        high_watermark: int | None = None,
        min_dirty_ratio: float = 0.0,
    ) -> Cleanable | None:
        """What `compact` would clean, or None (see there)."""
        self._now_ms = max(self._now_ms, now_ms)
        first_dirty = self.log_start_offset if first_dirty_offset is None else first_dirty_offset
        cleanable = find_cleanable(
            self.segments,
            self._valid_first_dirty(first_dirty),
            self._stable_end(high_watermark),
            now_ms,
            self.config.min_compaction_lag_ms,
        )
        if cleanable is None or not cleanable.dirty_bytes:
            return None
        if cleanable.dirty_ratio < min_dirty_ratio:
            return None
        return cleanable

    def _valid_first_dirty(self, offset: int) -> int:
        """Kafka's cleanableOffsets: below the log start means the log start; beyond the log
        end (the log was truncated or replaced) the checkpoint is stale, so start over."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            return self.log_start_offset
        return offset

    def _stable_end(self, high_watermark: int | None) -> int:
        """Nothing at or above the high watermark or the first open transaction is cleaned
        on: it may still be truncated or aborted."""
        end = self.log_end_offset
        if high_watermark is not None:
            end = min(high_watermark, end)
        unstable = self.first_unstable_offset
        return end if unstable is None else min(end, unstable)

    def clean_job(self, cleanable: Cleanable, segments: list[LogSegment], now_ms: int) -> CleanJob:
        """Everything a cleaning of `segments` (the cleanable ones) needs, as plain data."""
        start, end = cleanable.first_dirty_offset, cleanable.map_end_offset
        mapped = [
            SegmentInfo.of(segment, segment.offset_index.lookup(start))
            for segment in self.segments
            if segment.base_offset < end and segment.next_offset > start
        ]
        config = self.config
        return CleanJob(
            dir=str(self.dir),
            sources=[SegmentInfo.of(segment) for segment in segments],
            mapped=mapped,
            first_dirty_offset=start,
            map_end_offset=end,
            now_ms=now_ms,
            segment_bytes=config.segment_bytes,
            segment_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            max_message_bytes=config.max_message_bytes,
            delete_retention_ms=config.delete_retention_ms,
            last_sequences={
                pid: entry.last_seq for pid, entry in self.producer_state.producers.items()
            },
            aborted_txns=list(self.aborted_txns),
        )

    def swap_cleaned(
        self,
        cleanable: Cleanable,
        segments: list[LogSegment],
        cleaned: CleanedSegments,
        now_ms: int,
        on_loop: Callable[[Callable[[], None]], None] | None = None,
    ) -> CleanResult:
        """Swap in, in order, each `.cleaned` segment a cleaning of `segments` wrote. From a
        worker thread pass `on_loop` (see `replace_segments_from_worker`)."""
        count = written = before = after = 0
        for group in cleaned.groups:
            if not group.written:
                continue
            old = segments[group.first : group.first + group.count]
            new = self.open_written_cleaned_segment(old[0].base_offset, now_ms)
            before += sum(segment.size for segment in old)
            after += new.size
            if on_loop is None:
                self.replace_segments(new, old, group.txn_index)
            else:
                self.replace_segments_from_worker(new, old, on_loop, group.txn_index)
            count += len(old)
            written += 1
        result = CleanResult(cleanable.end_offset, count, written, before, after, cleaned.pid)
        if count:
            log.info(
                "%s: cleaned %d segments into %d below offset %d in process %d, %d bytes reclaimed",
                self.dir,
                count,
                written,
                cleanable.end_offset,
                cleaned.pid,
                result.bytes_reclaimed,
            )
        return result

    def open_written_cleaned_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """The `.cleaned` segment a cleaner process wrote and flushed, opened to swap it in."""
        segment = self._open_segment(base_offset, now_ms, CLEANED_SUFFIX)
        if segment.needs_recovery:
            segment.delete()
            raise KafkaStorageError(f"cleaned segment {base_offset} of {self.dir} is unreadable")
        return segment

    def replace_segments(
        self, new: LogSegment, old: list[LogSegment], kept_txns: Sequence[AbortedTxn] = ()
    ) -> None:
        """Swap a flushed `.cleaned` segment in for consecutive `old` ones (same first base).

        Kafka's replaceSegments: rename to `.swap` (the commit point: from here a restart
        finishes the swap, see `_complete_swap`), delete the old segments, rename to the
        final names. The directory is fsynced after each step so a restart never sees the
        final names while old segments overlapping them survive.
        """
        assert new.suffix == CLEANED_SUFFIX and new.base_offset == old[0].base_offset
        first = self.segments.index(old[0])
        assert self.segments[first : first + len(old)] == old and old[-1] is not self.segments[-1]
        try:
            new.change_suffix(SWAP_SUFFIX)
            fsync_dir(self.dir)
            for segment in old:
                segment.delete()
            self.segments[first : first + len(old)] = [new]
            self._bases_key = None  # a middle segment changed: the cache key cannot tell
            self._offset_metadata.clear()
            fsync_dir(self.dir)
            new.change_suffix("")
            fsync_dir(self.dir)
            self._replace_txn_index(new, old, kept_txns, lambda change: change())
        except OSError as exc:
            message = f"swapping cleaned segments into {self.dir} failed: {exc}"
            raise KafkaStorageError(message) from exc

    def _replace_txn_index(
        self,
        new: LogSegment,
        old: list[LogSegment],
        kept: Sequence[AbortedTxn],
        on_loop: Callable[[Callable[[], None]], None],
    ) -> None:
        """After a swap: the cleaned segment's `.txnindex` holds the aborted transactions
        whose abort markers the cleaner kept (Kafka's cleaned txnIndex); the old segments'
        indexes go. Written after the segments, so a crash leaves a superset (entries whose
        records are gone filter nothing)."""
        base, end = new.base_offset, old[-1].next_offset
        rewrite_atomically(self.dir, base, list(kept))
        for segment in old[1:]:
            txn_index_path(self.dir, segment.base_offset).unlink(missing_ok=True)

        def change() -> None:
            others = [e for e in self.aborted_txns if not base <= e.last_offset < end]
            self.aborted_txns = sorted([*others, *kept], key=lambda entry: entry.last_offset)

        on_loop(change)

    def replace_segments_from_worker(
        self,
        new: LogSegment,
        old: list[LogSegment],
        on_loop: Callable[[Callable[[], None]], None],
        kept_txns: Sequence[AbortedTxn] = (),
    ) -> None:
        """`replace_segments` for the cleaner's worker thread: the renames, fsyncs and unlinks
        run here, only the change of `segments` runs on the event loop (`on_loop`), so readers
        there never see the list change under them.

        Crash safety as Kafka's: `.swap` (fsynced) is the commit point; the old segments
        become `.deleted` before the swap gets its final name, and a restart completes a
        `.swap` and drops `.deleted` files.
        """
        assert new.suffix == CLEANED_SUFFIX and new.base_offset == old[0].base_offset
        try:
            # Touched here, so pinned open (file_cache.worker_io): the loop must not reopen
            # them by path while they are renamed.
            _ = (new.fd, new.offset_index.fd, new.time_index.fd)
            new.change_suffix(SWAP_SUFFIX)
            fsync_dir(self.dir)
            on_loop(lambda: self._swap_in(new, old))
            fsync_dir(self.dir)
            new.change_suffix("")
            fsync_dir(self.dir)
            for segment in old:
                segment.delete()
            self._replace_txn_index(new, old, kept_txns, on_loop)
        except OSError as exc:
            message = f"swapping cleaned segments into {self.dir} failed: {exc}"
            raise KafkaStorageError(message) from exc

    def _swap_in(self, new: LogSegment, old: list[LogSegment]) -> None:
        first = self.segments.index(old[0])
        assert self.segments[first : first + len(old)] == old and old[-1] is not self.segments[-1]
        for segment in old:
            segment.change_suffix(DELETED_SUFFIX)
            segment.close_files()  # deferred while the worker still holds them
        self.segments[first : first + len(old)] = [new]
        self._bases_key = None
        self._offset_metadata.clear()

    # ---- configuration, flushing and lifecycle ---------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._load_remote()
        self.producer_state.producer_id_expiration_ms = config.producer_id_expiration_ms
        for segment in self.segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def flush(self) -> None:
        """fsync everything up to the log end and advance the recovery point to it."""
        self._flush_upto(self.log_end_offset)
        self._last_flush_ms = self._now_ms

    def _flush_upto(self, offset: int) -> None:
        if offset <= self.recovery_point and not self._dir_dirty:
            return
        for segment in self.segments[self._segment_index(self.recovery_point) :]:
            if segment.base_offset >= offset:
                break
            segment.flush()
        sync_epochs = self.leader_epoch_cache.take_unsynced()
        if sync_epochs:
            with contextlib.suppress(FileNotFoundError):  # the log was deleted meanwhile
                fsync_file(self.leader_epoch_cache.path)
        if self._dir_dirty or self._take_new_entries() or sync_epochs:
            fsync_dir(self.dir)
            self._dir_dirty = False
        self.recovery_point = max(self.recovery_point, offset)

    def maybe_flush(self, now_ms: int) -> None:
        """Time-based policy: flush when the last flush is flush.ms old."""
        self._now_ms = max(self._now_ms, now_ms)
        if now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms

    def close(self) -> None:
        """Flush, snapshot producer state at the log end and close every file."""
        if not self.segments or self.active_segment.closed:
            return
        self.active_segment.on_become_inactive()
        self.flush()
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        for segment in self.segments:
            segment.close_files()
        shutil.rmtree(self.dir, ignore_errors=True)

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or beyond `offset` (follower truncation)."""
        if offset >= self.log_end_offset:
            return
        self._offset_metadata.clear()
        now_ms = self._now_ms
        if offset < self.segments[0].base_offset:
            self._truncate_fully_and_start_at(offset, now_ms)
            self.log_start_offset = offset
        else:
            keep = self._segment_index(offset)
            if self.segments[keep].base_offset == offset and keep > 0:
                keep -= 1
            for segment in self.segments[keep + 1 :]:
                segment.delete()
            del self.segments[keep + 1 :]
            self.active_segment.truncate_to(offset, now_ms)
        leo = self.log_end_offset
        self.recovery_point = min(self.recovery_point, leo)
        self.log_start_offset = min(self.log_start_offset, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        self._load_producer_state(now_ms)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at `offset` (a follower whose log ends
        before its leader's log start: what it has can never be continued)."""
        self._truncate_fully_and_start_at(offset, self._now_ms)
        self.log_start_offset = offset
        self._load_producer_state(self._now_ms)

    def restore_remote_aux_state(
        self, epochs: list[EpochEntry], producer_snapshot: bytes | None
    ) -> None:
        """After `truncate_fully_and_start_at`: the leader epochs and the producer snapshot
        uploaded with the remote segment ending just before the log start (Kafka's
        ReplicaFetcherTierStateMachine.buildRemoteLogAuxState), so this replica goes on with
        its leader's epochs and producer state, not empty ones."""
        for entry in epochs:
            if entry.start_offset <= self.log_start_offset:  # beyond: not in this log yet
                self.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        if producer_snapshot is not None:
            path = self.dir / f"{self.log_start_offset:020d}{SNAPSHOT_SUFFIX}"
            replace_unsynced(path, producer_snapshot)
        self._load_producer_state(self._now_ms)

    def _truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        self._offset_metadata.clear()
        for segment in self.segments:
            segment.delete()
        self.segments = [self._open_segment(offset, now_ms)]
        self._dir_dirty = True
        self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_after(-1)
        self.producer_state.clear(offset)


@dataclass(eq=False)
class DiskWork:
    """One log's fsyncs after rolls and removals of deleted segments' files, for a worker
    thread: `run` there (it touches only inactive segments), then `finish` on the loop."""

    log: UnifiedLog
    flush: list[LogSegment]
    flush_dir: bool
    flush_offset: int | None  # the recovery point once the fsyncs are done
    doomed: list[LogSegment]
    sync_epochs: bool = False  # the leader epoch checkpoint was replaced without fsync

    def run(self) -> None:
        for segment in self.flush:
            try:
                segment.flush()
            except FileNotFoundError:  # deleted meanwhile: nothing left to make durable
                pass
        if self.sync_epochs:
            with contextlib.suppress(FileNotFoundError):
                fsync_file(self.log.leader_epoch_cache.path)
        if self.flush_dir:
            fsync_dir(self.log.dir)
        for segment in self.doomed:
            segment.delete()

    def finish(self) -> None:
        if self.flush_offset is not None:
            self.log.recovery_point = max(self.log.recovery_point, self.flush_offset)

    def retry_later(self) -> None:
        """After a failed run: the log asks for the same work again next time."""
        log_ = self.log
        log_._dir_dirty |= self.flush_dir
        log_.leader_epoch_cache.unsynced |= self.sync_epochs
        if self.flush_offset is not None:
            log_._roll_flush_offset = max(log_._roll_flush_offset or 0, self.flush_offset)
        log_._doomed.extend(self.doomed)


def _validate_client_batch(header: BatchHeader) -> None:
    """The LogValidator checks Kafka applies to client batches beyond framing and CRC."""
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id}"
        )
    if header.is_transactional and not header.has_producer_id:
        raise InvalidRecordError("Transactional batch without a producer id")


def _maybe_assign_epoch(cache: LeaderEpochCache, header: BatchHeader) -> None:
    epoch = header.partition_leader_epoch
    if epoch >= 0 and epoch > cache.latest_epoch:
        cache.assign(epoch, header.base_offset)


def _segment_bases(dir: Path) -> list[int]:
    return sorted(int(path.stem) for path in dir.glob("*" + LOG_SUFFIX) if path.stem.isdigit())


def _prepare_files(dir: Path) -> None:
    """Kafka's LogLoader file passes: drop temporaries (`.cleaned` included), complete the
    swaps a crash interrupted, then drop what is left of them and orphaned indexes."""
    _remove_files(dir, lambda path: path.name.endswith(TEMPORARY_SUFFIXES))
    for swap_log in sorted(dir.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        _complete_swap(dir, swap_log)
    _remove_files(
        dir,
        lambda path: (
            path.name.endswith(SWAP_SUFFIX)  # an index renamed before its log reached .swap
            or (
                path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, HEADER_INDEX_SUFFIX)
                and not path.with_suffix(LOG_SUFFIX).exists()
            )
        ),
    )


def _remove_files(dir: Path, predicate: Callable[[Path], bool]) -> None:
    for path in dir.iterdir():
        if path.is_file() and predicate(path):
            log.info("removing leftover file %s", path)
            path.unlink(missing_ok=True)


def _complete_swap(dir: Path, swap_log: Path) -> None:
    """Finish an interrupted replace_segments: the `.swap` log was flushed before its rename,
    so it is whole. Delete every old segment inside its offset range, then rename it (and
    any `.swap` indexes; missing ones are rebuilt) to the final names.

    Like Kafka, the range ends at the swap's last offset: an old segment whose records were
    all cleaned away may survive; it only holds records a later cleaning drops again.
    """
    stem = swap_log.name.split(".", 1)[0]
    if not stem.isdigit():
        return
    base = int(stem)
    end = max(_next_offset_of(swap_log, base), base + 1)
    log.warning("%s: completing the interrupted swap of cleaned segment %d", dir, base)
    for old_base in _segment_bases(dir):
        if base <= old_base < end:
            for path in (header_index_path(dir, old_base), *segment_paths(dir, old_base)):
                path.unlink(missing_ok=True)
    fsync_dir(dir)
    swap_paths, final_paths = segment_paths(dir, base, SWAP_SUFFIX), segment_paths(dir, base)
    for source, target in zip(swap_paths[::-1], final_paths[::-1], strict=True):
        if source.exists():
            os.replace(source, target)
    fsync_dir(dir)


def _next_offset_of(log_path: Path, base_offset: int) -> int:
    fd = os.open(log_path, os.O_RDONLY)
    try:
        next_offset = base_offset
        for _, header in scan_headers(fd, 0, os.fstat(fd).st_size):
            next_offset = header.next_offset
        return next_offset
    finally:
        os.close(fd)
