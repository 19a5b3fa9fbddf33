"""Log compaction (cleanup.policy=compact) of one UnifiedLog, after Kafka's LogCleaner.

One cleaning:
1. `find_cleanable`: the cleanable range is whole segments from the log start up to the
   first uncleanable offset: the active segment's base, the high watermark, the first open
   transaction and (min.compaction.lag.ms) the first segment holding a too recent record.
   Segments below the first dirty offset (where the last cleaning stopped) are "clean".
2. `build_offset_map`: key -> latest offset over the dirty records, from the first dirty
   offset up to the high watermark, so newer values in uncleanable segments (the active
   one too) also make older copies redundant.
3. `_clean_group`: adjacent cleanable segments are grouped up to segment.bytes, so cleaned
   segments merge instead of shrinking forever; each group is rewritten into one
   `<base>.log.cleaned` keeping every record that is the latest for its key, has a null key
   (Kafka rejects those on compacted topics; they are kept, not dropped), or is a tombstone
   younger than delete.retention.ms (judged by its source segment's largest timestamp).
   Offsets are preserved: a batch keeps its base offset and lastOffsetDelta and only its
   retained records; an emptied batch is dropped unless it holds its producer's last
   sequence (Kafka's RETAIN_EMPTY keeps the header so idempotence state survives a reload).
   Transactions as Kafka's cleaner (storage/cleaned_txns.py): records of aborted
   transactions are removed (and never mapped); a marker is removed once no batch of its
   transaction is left and its segment is older than delete.retention.ms; the cleaned
   segment's `.txnindex` keeps the aborted transactions whose markers stay.
4. `UnifiedLog.replace_segments` swaps each group in crash-safely (`.cleaned` -> `.swap` ->
   final names; a restart completes a `.swap`, discards a `.cleaned`).

Synchronous. In the broker steps 2-3 run in a cleaner process (storage/cleaner_process.py,
which reuses `filter_batch` and `segment_batches`), or as `clean_log` on a worker thread
where no process can start (broker/log_maintenance.py): either reads only segments below the
active one, which appends never touch, while the log holds their deletion back
(`UnifiedLog.cleaning`), and the swap happens through `UnifiedLog.replace_segments_from_worker`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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
from kafkalite.storage.producer_state import ProducerStateManager
from kafkalite.storage.records import Record, decode_records, encode_record_batch
from kafkalite.storage.segment import CLEANED_SUFFIX, INT32_MAX, MIN_BATCH_LENGTH, LogSegment
from kafkalite.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkalite.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from kafkalite.storage.log import LogConfig, UnifiedLog

logger = logging.getLogger("kafkalite.storage")

READ_CHUNK = 1 << 20
OffsetMap = dict[bytes, int]
Swap = Callable[[LogSegment, list[LogSegment], list[AbortedTxn]], None]
LastSequence = Callable[[int], int | None]  # producer id -> its last sequence, if known


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


# ---- the cleanable range ---------------------------------------------------------------------


def find_cleanable(
    log: UnifiedLog, first_dirty_offset: int, now_ms: int, high_watermark: int | None = None
) -> Cleanable | None:
    """The range to clean, or None when no segment below the active one is cleanable."""
    segments = log.segments
    first_dirty = _valid_first_dirty(log, first_dirty_offset)
    stable_end = _stable_end(log, high_watermark)
    limit = min(segments[-1].base_offset, stable_end)
    lag_limit = _compaction_lag_limit(segments, first_dirty, now_ms, log.config)
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


def _valid_first_dirty(log: UnifiedLog, offset: int) -> int:
    """Kafka's cleanableOffsets: below the log start means the log start; beyond the log end
    (the log was truncated or replaced) the checkpoint is stale, so start over."""
    if offset < log.log_start_offset or offset > log.log_end_offset:
        return log.log_start_offset
    return offset


def _stable_end(log: UnifiedLog, high_watermark: int | None) -> int:
    """Nothing at or above the high watermark or the first open transaction is used: it may
    still be truncated or aborted."""
    end = log.log_end_offset if high_watermark is None else min(high_watermark, log.log_end_offset)
    unstable = log.first_unstable_offset
    return end if unstable is None else min(end, unstable)


def _compaction_lag_limit(
    segments: list[LogSegment], first_dirty: int, now_ms: int, config: LogConfig
) -> int | None:
    """Base of the first dirty segment holding a record newer than min.compaction.lag.ms."""
    if config.min_compaction_lag_ms <= 0:
        return None
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset <= first_dirty:
            continue
        if segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms:
            return segment.base_offset
    return None


# ---- cleaning ----------------------------------------------------------------------------------


def _keep_going() -> None:
    pass


def clean_log(
    log: UnifiedLog,
    cleanable: Cleanable,
    now_ms: int,
    *,
    segments: list[LogSegment] | None = None,
    swap: Swap | None = None,
    pause: Callable[[], None] = _keep_going,
) -> CleanResult:
    """Rewrite the cleanable segments group by group; see the module docstring.

    `segments` are the cleanable segments as planned (default: taken from the log now),
    `swap` puts a cleaned segment in for its group (default: `log.replace_segments`), and
    `pause` runs between batches: it may raise to stop (a worker thread's cancellation) and
    yield the GIL so the event loop thread is not starved.
    """
    offset_map = build_offset_map(
        log, cleanable.first_dirty_offset, cleanable.map_end_offset, pause
    )
    pending = list(segments if segments is not None else log.segments[: cleanable.segment_count])
    swap = swap or log.replace_segments
    txns = CleanedTransactions.over(
        log.aborted_txns, pending[0].base_offset, pending[-1].next_offset
    )
    cleaned = written = before = after = 0
    while pending:
        group, new = _clean_group(log, pending, offset_map, now_ms, swap, pause, txns)
        del pending[: len(group)]
        if new is not None:
            cleaned += len(group)
            written += 1
            before += sum(segment.size for segment in group)
            after += new.size
    result = CleanResult(cleanable.end_offset, cleaned, written, before, after)
    if cleaned:
        logger.info(
            "%s: cleaned %d segments into %d below offset %d, %d bytes reclaimed",
            log.dir,
            cleaned,
            written,
            cleanable.end_offset,
            result.bytes_reclaimed,
        )
    return result


def build_offset_map(
    log: UnifiedLog, start: int, end: int, pause: Callable[[], None] = _keep_going
) -> OffsetMap:
    """key -> offset of its latest record in [start, end). Control records carry no data
    keys, and records of aborted transactions are skipped, as in Kafka's buildOffsetMap."""
    offsets: OffsetMap = {}
    txns = CleanedTransactions.over(log.aborted_txns, start, end)
    for segment in list(log.segments):  # a copy: appends may roll meanwhile
        pause()
        if segment.base_offset >= end:
            break
        if segment.next_offset <= start:
            continue
        for header, batch in segment_batches(segment, segment.offset_index.lookup(start)):
            pause()
            if header.base_offset >= end:
                break
            if header.last_offset < start:
                continue
            map_batch(offsets, header, batch, start, end, txns)
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
    log: UnifiedLog,
    pending: list[LogSegment],
    offset_map: OffsetMap,
    now_ms: int,
    swap: Swap,
    pause: Callable[[], None],
    txns: CleanedTransactions,
) -> tuple[list[LogSegment], LogSegment | None]:
    """Clean the next segments of `pending` into one `.cleaned` segment and swap it in.

    Like Kafka's groupSegmentsBySize, segments join while the result fits in segment.bytes
    (and its indexes and int32 relative offsets fit), but judged by the cleaned size so
    far rather than the sources' sizes, so segments emptied by cleaning merge at once.
    Returns (group, new segment), the segment None when nothing changed (one segment with
    nothing to drop): swapping in a copy would only cost I/O.
    """
    new = log.open_cleaned_segment(pending[0].base_offset, now_ms)
    group: list[LogSegment] = []
    try:
        changed = False
        for source in pending:
            if group and not _fits(new, source, log.config):
                break
            pause()
            changed |= _copy_retained(log, source, new, offset_map, now_ms, pause, txns)
            group.append(source)
        kept_txns = txns.take_index()
        if not changed and len(group) == 1:
            new.delete()
            return group, None
        new.on_become_inactive()
        new.flush()
        # Keep the newest source mtime: time retention falls back to it without timestamps.
        mtime_ns = max(os.fstat(segment.fd).st_mtime_ns for segment in group)
        os.utime(new.fd, ns=(mtime_ns, mtime_ns))
        swap(new, group, kept_txns)
    except BaseException:
        if new.suffix == CLEANED_SUFFIX:  # not committed yet: the log is untouched
            new.delete()
        raise
    return group, new


def _fits(new: LogSegment, source: LogSegment, config: LogConfig) -> bool:
    """Whether all of `source` surely fits into the cleaned segment `new`."""
    index_bytes = (len(new.offset_index) + len(source.offset_index)) * OFFSET_ENTRY_SIZE
    time_bytes = (len(new.time_index) + len(source.time_index)) * TIME_ENTRY_SIZE
    return (
        new.size + source.size <= config.segment_bytes
        and index_bytes <= config.segment_index_bytes
        and time_bytes <= config.segment_index_bytes
        and source.next_offset - 1 - new.base_offset <= INT32_MAX
    )


def _copy_retained(
    log: UnifiedLog,
    source: LogSegment,
    dest: LogSegment,
    offset_map: OffsetMap,
    now_ms: int,
    pause: Callable[[], None],
    txns: CleanedTransactions,
) -> bool:
    """Append what `source` retains to `dest`; True if anything was dropped or rewritten."""
    retain_deletes = source.largest_timestamp() > now_ms - log.config.delete_retention_ms
    changed = False
    for header, batch in segment_batches(source):
        pause()
        out = filter_batch(
            header,
            batch,
            offset_map,
            retain_deletes,
            last_sequence_of(log.producer_state),
            log.config.max_message_bytes,
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


def last_sequence_of(producer_state: ProducerStateManager) -> LastSequence:
    def last_sequence(producer_id: int) -> int | None:
        entry = producer_state.last_entry(producer_id)
        return None if entry is None else entry.last_seq

    return last_sequence


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
