"""Log compaction (cleanup.policy=compact) of one log, after Kafka's Cleaner.

The algorithm works on a `CleanJob`: the log directory, the cleanable segments as the log saw
them (sizes, offsets, index entries) and config numbers, nothing else. So it needs no
UnifiedLog and runs the same in the broker's cleaner process (storage/log_cleaner.py) as in
the calling thread (`UnifiedLog.compact`).

One cleaning:
1. `find_cleanable` (called by `UnifiedLog.plan_compaction`): the cleanable range is whole
   segments from the log start up to the first uncleanable offset: the active segment's base,
   the high watermark, the first open transaction and (min.compaction.lag.ms) the first
   segment holding a too recent record. Segments below the first dirty offset (where the last
   cleaning stopped) are "clean".
2. `UnifiedLog.clean_job` describes it as a `CleanJob`.
3. `clean_segments`: `_build_offset_map` maps key -> latest offset over the dirty records,
   from the first dirty offset up to the high watermark, so newer values in uncleanable
   segments (the active one too) also make older copies redundant. Then `_clean_group`
   groups adjacent cleanable segments up to segment.bytes, so cleaned segments merge instead
   of shrinking forever; each group is rewritten into one flushed `<base>.log.cleaned`
   keeping every record that is the latest for its key, has a null key (Kafka rejects those
   on compacted topics; they are kept, not dropped), or is a tombstone younger than
   delete.retention.ms (judged by its source segment's largest timestamp).
   Offsets are preserved: a batch keeps its base offset and lastOffsetDelta and only its
   retained records; an emptied batch is dropped unless it holds its producer's last
   sequence (Kafka's RETAIN_EMPTY keeps the header so idempotence state survives a reload).
   Transactions as Kafka's cleaner (storage/cleaned_txns.py): records of aborted
   transactions are removed (and never mapped); a marker is removed once no batch of its
   transaction is left and its segment is older than delete.retention.ms; the cleaned
   segment's `.txnindex` keeps the aborted transactions whose markers stay.
4. `UnifiedLog.swap_cleaned` swaps each written group in crash-safely (`.cleaned` -> `.swap`
   -> final names; a restart completes a `.swap`, discards a `.cleaned`).

Only segments below the active one are read, which appends never touch, and the log holds
their deletion back while a cleaning runs (`UnifiedLog.cleaning`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kafkalite.storage.batch import (
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
    parse_header,
)
from kafkalite.storage.cleaned_txns import CleanedTransactions
from kafkalite.storage.errors import KafkaStorageError
from kafkalite.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from kafkalite.storage.records import Record, decode_records, encode_record_batch
from kafkalite.storage.segment import (
    CLEANED_SUFFIX,
    INT32_MAX,
    MIN_BATCH_LENGTH,
    LogSegment,
    segment_paths,
)
from kafkalite.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkalite.storage.txn_index import AbortedTxn

READ_CHUNK = 1 << 20
OffsetMap = dict[bytes, int]
LastSequence = Callable[[int], int | None]  # producer id -> its last sequence, if known
Pause = Callable[[], None]  # runs between batches; may raise to stop the cleaning


@dataclass(frozen=True, slots=True)
class Cleanable:
    """What one cleaning of a log covers."""

    first_dirty_offset: int  # everything below was cleaned before
    end_offset: int  # first uncleanable offset, a segment base: segments below get cleaned
    map_end_offset: int  # keys are mapped over [first_dirty_offset, map_end_offset)
    segment_count: int  # log.segments[:segment_count] are the cleanable segments
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(frozen=True, slots=True)
class CleanResult:
    first_dirty_offset: int  # checkpoint this: the next cleaning starts here
    segments_cleaned: int  # source segments rewritten
    segments_written: int  # cleaned segments that replaced them
    bytes_before: int  # size of the rewritten source segments
    bytes_after: int
    cleaner_pid: int = field(default_factory=os.getpid)  # the process that cleaned

    @property
    def bytes_reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment as the log saw it when the job was planned (segments below the active one
    never change)."""

    base_offset: int
    size: int  # bytes to read: for the active segment, its size when the job was planned
    next_offset: int
    map_position: int  # where mapping starts (offset index lookup of the first dirty offset)
    index_entries: int
    time_index_entries: int
    largest_timestamp: int

    @classmethod
    def of(cls, segment: LogSegment, map_position: int = 0) -> SegmentInfo:
        return cls(
            base_offset=segment.base_offset,
            size=segment.size,
            next_offset=segment.next_offset,
            map_position=map_position,
            index_entries=len(segment.offset_index),
            time_index_entries=len(segment.time_index),
            largest_timestamp=segment.largest_timestamp(),
        )


@dataclass(frozen=True, slots=True)
class CleanJob:
    """One cleaning as plain data: what a cleaner process receives."""

    dir: str
    sources: list[SegmentInfo]  # the cleanable segments, in order
    mapped: list[SegmentInfo]  # the segments holding [first_dirty_offset, map_end_offset)
    first_dirty_offset: int
    map_end_offset: int
    now_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    max_message_bytes: int
    delete_retention_ms: int
    last_sequences: dict[int, int] = field(default_factory=dict)  # producer id -> last seq
    aborted_txns: list[AbortedTxn] = field(default_factory=list)  # the log's aborted index


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    first: int  # index into CleanJob.sources
    count: int
    written: bool  # False: one segment with nothing to drop, left as it is
    txn_index: list[AbortedTxn] = field(default_factory=list)  # the cleaned segment's


@dataclass(frozen=True, slots=True)
class CleanedSegments:
    """What `clean_segments` wrote: flushed `.cleaned` segments for the log to swap in."""

    groups: list[CleanedGroup]
    pid: int  # the process that cleaned


# ---- the cleanable range ---------------------------------------------------------------------


def find_cleanable(
    segments: list[LogSegment],
    first_dirty: int,
    stable_end: int,
    now_ms: int,
    min_compaction_lag_ms: int,
) -> Cleanable | None:
    """The range to clean, or None when no segment below the active one is cleanable.

    `first_dirty` is where the last cleaning stopped (within the log), `stable_end` the first
    offset that may still be truncated or aborted (high watermark, first open transaction).
    """
    limit = min(segments[-1].base_offset, stable_end)
    lag_limit = _compaction_lag_limit(segments, first_dirty, now_ms, min_compaction_lag_ms)
    if lag_limit is not None:
        limit = min(limit, lag_limit)
    count = sum(1 for segment in segments[1:] if segment.base_offset <= limit)
    if count == 0:
        return None
    clean_bytes = dirty_bytes = 0
    for i in range(count):
        if segments[i + 1].base_offset <= first_dirty:
            clean_bytes += segments[i].size
        else:
            dirty_bytes += segments[i].size
    return Cleanable(
        first_dirty_offset=first_dirty,
        end_offset=segments[count].base_offset,
        map_end_offset=max(stable_end, first_dirty),
        segment_count=count,
        clean_bytes=clean_bytes,
        dirty_bytes=dirty_bytes,
    )


def _compaction_lag_limit(
    segments: list[LogSegment], first_dirty: int, now_ms: int, min_compaction_lag_ms: int
) -> int | None:
    """Base of the first dirty segment holding a record newer than min.compaction.lag.ms."""
    if min_compaction_lag_ms <= 0:
        return None
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset <= first_dirty:
            continue
        if segment.largest_timestamp() > now_ms - min_compaction_lag_ms:
            return segment.base_offset
    return None


# ---- cleaning ----------------------------------------------------------------------------------


def keep_going() -> None:
    """The default `Pause`: never stops."""


def clean_segments(job: CleanJob, pause: Pause = keep_going) -> CleanedSegments:
    """Build the offset map and write one flushed `.cleaned` segment per group that changed.

    On an error no `.cleaned` file of this job is left behind (a killed process leaves them:
    `discard_cleaned`, and a log's load, removes those)."""
    directory = Path(job.dir)
    try:
        offset_map = _build_offset_map(directory, job, pause)
        start, end = job.sources[0].base_offset, job.sources[-1].next_offset
        txns = CleanedTransactions.over(job.aborted_txns, start, end)
        groups: list[CleanedGroup] = []
        first = 0
        while first < len(job.sources):
            group = _clean_group(directory, job, first, offset_map, pause, txns)
            groups.append(group)
            first += group.count
    except BaseException:
        discard_cleaned(job)
        raise
    return CleanedSegments(groups, os.getpid())


def discard_cleaned(job: CleanJob) -> None:
    """Remove the `.cleaned` files a cleaning of `job` may have written: never part of the log."""
    for info in job.sources:
        for path in segment_paths(Path(job.dir), info.base_offset, CLEANED_SUFFIX):
            path.unlink(missing_ok=True)


@dataclass(slots=True)
class _Source:
    """A read-only view of a segment file for `segment_batches`."""

    dir: Path
    base_offset: int
    size: int
    fd: int


def _open_source(directory: Path, info: SegmentInfo) -> _Source:
    fd = os.open(segment_paths(directory, info.base_offset)[0], os.O_RDONLY)
    return _Source(directory, info.base_offset, info.size, fd)


def _build_offset_map(directory: Path, job: CleanJob, pause: Pause) -> OffsetMap:
    """key -> offset of its latest record in [first_dirty_offset, map_end_offset). Control
    records carry no data keys, and records of aborted transactions are skipped, as in
    Kafka's buildOffsetMap."""
    start, end = job.first_dirty_offset, job.map_end_offset
    offsets: OffsetMap = {}
    txns = CleanedTransactions.over(job.aborted_txns, start, end)
    for info in job.mapped:
        source = _open_source(directory, info)
        try:
            for header, batch in segment_batches(source, info.map_position):
                pause()
                if header.base_offset >= end:
                    break
                if header.last_offset < start:
                    continue
                map_batch(offsets, header, batch, start, end, txns)
        finally:
            os.close(source.fd)
    return offsets


def map_batch(
    offsets: OffsetMap,
    header: BatchHeader,
    batch: bytes | memoryview,
    start: int,
    end: int,
    txns: CleanedTransactions,
) -> None:
    """One batch of the offset map: its keys, unless it is a marker or aborted."""
    if header.is_control:
        txns.on_control_batch(header, batch)
        return
    if txns.on_batch(header):
        return
    for record in decode_records(batch):
        if record.key is not None and start <= record.offset < end:
            offsets[record.key] = record.offset


def _clean_group(
    directory: Path,
    job: CleanJob,
    first: int,
    offset_map: OffsetMap,
    pause: Pause,
    txns: CleanedTransactions,
) -> CleanedGroup:
    """Clean the next segments of the job into one flushed `.cleaned` segment.

    Like Kafka's groupSegmentsBySize, segments join while the result fits in segment.bytes
    (and its indexes and int32 relative offsets fit), but judged by the cleaned size so
    far rather than the sources' sizes, so segments emptied by cleaning merge at once.
    Nothing is written when nothing changed (one segment with nothing to drop): swapping
    in a copy would only cost I/O.
    """
    base = job.sources[first].base_offset
    for path in segment_paths(directory, base, CLEANED_SUFFIX):
        path.unlink(missing_ok=True)
    new = LogSegment.open(
        directory,
        base,
        index_interval_bytes=job.index_interval_bytes,
        max_index_bytes=job.segment_index_bytes,
        now_ms=job.now_ms,
        suffix=CLEANED_SUFFIX,
    )
    count = 0
    try:
        changed = False
        mtime_ns = 0
        for info in job.sources[first:]:
            if count and not _fits(new, info, job):
                break
            source = _open_source(directory, info)
            try:
                changed |= _copy_retained(source, info, new, offset_map, job, pause, txns)
                mtime_ns = max(mtime_ns, os.fstat(source.fd).st_mtime_ns)
            finally:
                os.close(source.fd)
            count += 1
        kept_txns = txns.take_index()
        if not changed and count == 1:
            new.delete()
            return CleanedGroup(first, 1, written=False)
        new.on_become_inactive()
        new.flush()
        # Keep the newest source mtime: time retention falls back to it without timestamps.
        os.utime(new.fd, ns=(mtime_ns, mtime_ns))
        new.close_files()
    except BaseException:
        new.delete()
        raise
    return CleanedGroup(first, count, written=True, txn_index=kept_txns)


def _fits(new: LogSegment, info: SegmentInfo, job: CleanJob) -> bool:
    """Whether all of the segment `info` surely fits into the cleaned segment `new`."""
    index_bytes = (len(new.offset_index) + info.index_entries) * OFFSET_ENTRY_SIZE
    time_bytes = (len(new.time_index) + info.time_index_entries) * TIME_ENTRY_SIZE
    return (
        new.size + info.size <= job.segment_bytes
        and index_bytes <= job.segment_index_bytes
        and time_bytes <= job.segment_index_bytes
        and info.next_offset - 1 - new.base_offset <= INT32_MAX
    )


def _copy_retained(
    source: _Source,
    info: SegmentInfo,
    dest: LogSegment,
    offset_map: OffsetMap,
    job: CleanJob,
    pause: Pause,
    txns: CleanedTransactions,
) -> bool:
    """Append what `source` retains to `dest`; True if anything was dropped or rewritten."""
    retain_deletes = info.largest_timestamp > job.now_ms - job.delete_retention_ms
    changed = False
    for header, batch in segment_batches(source):
        pause()
        out = filter_batch(
            header,
            batch,
            offset_map,
            retain_deletes,
            job.last_sequences.get,
            job.max_message_bytes,
            txns,
        )
        changed |= out is not batch
        if out is not None:
            dest.append(out, [parse_header(out)])
    return changed


def filter_batch(
    header: BatchHeader,
    batch: bytes | memoryview,
    offset_map: OffsetMap,
    retain_deletes: bool,
    last_sequence: LastSequence,
    max_batch_bytes: int,
    txns: CleanedTransactions,
) -> bytes | memoryview | None:
    """The batch to write for `batch`: itself when every record stays, a rewrite holding the
    retained records, or None to drop it. Markers go once `txns` allows it and their
    segment is past delete.retention.ms; records of aborted transactions always go."""
    if header.is_control:
        removable = txns.on_control_batch(header, batch)
        return None if removable and not retain_deletes else batch
    if txns.on_batch(header):
        if not _holds_last_sequence(header, last_sequence):
            return None
        return batch if header.records_count == 0 else rebuild_batch(header, [])
    records = decode_records(batch)
    kept = [record for record in records if _retain(record, offset_map, retain_deletes)]
    if not kept and not _holds_last_sequence(header, last_sequence):
        return None  # also a bare header kept earlier, once its producer wrote again
    if len(kept) == len(records):
        return batch
    rewritten = rebuild_batch(header, kept)
    # Retained records are written uncompressed (Kafka recompresses with the batch's codec).
    # Should that outgrow what recovery accepts, keep the original: compaction may keep
    # extra records, never lose any.
    return rewritten if len(rewritten) <= max_batch_bytes else batch


def _retain(record: Record, offset_map: OffsetMap, retain_deletes: bool) -> bool:
    """Kafka's shouldRetainRecord, except that keyless records are kept."""
    if record.key is None:
        return True
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False  # a newer record has the same key
    return record.value is not None or retain_deletes


def _holds_last_sequence(header: BatchHeader, last_sequence: LastSequence) -> bool:
    """Kafka's RETAIN_EMPTY: the producer's newest batch stays (as a bare header) so a reload
    that replays the log still knows its last sequence."""
    return header.has_producer_id and last_sequence(header.producer_id) == header.last_sequence


def rebuild_batch(header: BatchHeader, records: list[Record]) -> bytes:
    """`header`'s batch holding only `records`: same base offset, lastOffsetDelta, epoch,
    producer fields and flags (as Kafka's filterTo), uncompressed."""
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    if records:
        base_timestamp = records[0].timestamp
        max_timestamp = (
            header.max_timestamp if log_append_time else max(record.timestamp for record in records)
        )
    else:
        base_timestamp = max_timestamp = header.max_timestamp
    return encode_record_batch(
        records,
        base_offset=header.base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        last_offset_delta=header.last_offset_delta,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        attributes=header.attributes,
    )


class SegmentFile(Protocol):
    """What `segment_batches` reads: a LogSegment, or a cleaner process's view of one."""

    dir: Path
    base_offset: int
    size: int

    @property
    def fd(self) -> int: ...


def segment_batches(
    segment: SegmentFile, start: int = 0
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, bytes) of every batch from byte `start` to the segment's end, read in chunks.

    Raises KafkaStorageError if the bytes do not parse as whole batches: cleaning must never
    drop the unreadable rest of a segment.
    """
    position = start
    while position < segment.size:
        if segment.size - position < HEADER_SIZE:
            raise _unreadable(segment, position)
        buf = os.pread(segment.fd, min(READ_CHUNK, segment.size - position), position)
        view, consumed = memoryview(buf), 0
        for offset, header in iter_batches(buf):
            yield header, view[offset : offset + header.size]
            consumed = offset + header.size
        if consumed == 0:  # one batch larger than the chunk
            header = parse_header(buf)
            if header.batch_length < MIN_BATCH_LENGTH or header.size > segment.size - position:
                raise _unreadable(segment, position)
            yield header, memoryview(os.pread(segment.fd, header.size, position))
            consumed = header.size
        position += consumed


def _unreadable(segment: SegmentFile, position: int) -> KafkaStorageError:
    return KafkaStorageError(
        f"cannot clean segment {segment.base_offset} of {segment.dir}: "
        f"no whole batch at byte {position} of {segment.size}"
    )
