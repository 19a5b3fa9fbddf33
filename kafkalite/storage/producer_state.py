"""ProducerStateManager: idempotent producer bookkeeping for one partition.

Follows Kafka's ProducerStateManager, ProducerAppendInfo and ProducerStateEntry: per
producer id the epoch and metadata of its last 5 batches, used to reject fenced epochs and
sequence gaps and to answer retried duplicates with their original offsets. State is
snapshotted to `<offset>.snapshot` files (CRC32C + JSON) and rebuilt on open by replaying
batch headers after the newest snapshot.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from crc32c import crc32c

from kafkalite.storage.batch import NO_SEQUENCE, BatchHeader
from kafkalite.storage.durable_files import write_atomically
from kafkalite.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError

log = logging.getLogger("kafkalite.storage")

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_TO_KEEP = 2
SNAPSHOT_VERSION = 1
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # room for transactions: -1 when none is open

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def without_batches(self) -> ProducerStateEntry:
        """Kafka's withProducerIdAndBatchMetadata(empty): the starting point of an append."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            last_timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    def maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()  # sequences restart with a new epoch
            self.producer_epoch = epoch

    def add_batch(self, header: BatchHeader) -> None:
        """Kafka's appendDataBatch for `header` as it is in the log (offsets assigned)."""
        self.maybe_update_epoch(header.producer_epoch)
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )
        self.last_timestamp = header.max_timestamp
        if header.is_transactional and self.current_txn_first_offset < 0:
            self.current_txn_first_offset = header.base_offset

    def merge(self, updated: ProducerStateEntry) -> None:
        """Kafka's ProducerStateEntry.update: take the epoch, then append the new batches."""
        self.maybe_update_epoch(updated.producer_epoch)
        self.last_timestamp = updated.last_timestamp
        self.batches.extend(updated.batches)
        self.coordinator_epoch = updated.coordinator_epoch
        self.current_txn_first_offset = updated.current_txn_first_offset

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class PendingAppend:
    """Validated producer updates of one append, committed once the batches are written."""

    updated: dict[int, ProducerStateEntry]
    duplicate: BatchMetadata | None = None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(eq=False)
class ProducerStateManager:
    dir: Path
    producer_id_expiration_ms: int
    producers: dict[int, ProducerStateEntry] = field(default_factory=dict)
    map_end_offset: int = 0  # state covers every batch below this offset
    # The snapshot files' offsets, sorted: listed once (a directory scan is O(segments), and a
    # roll takes a snapshot), then kept by this manager, the only writer; None: list again.
    _snapshots: list[int] | None = field(default=None, repr=False, compare=False)

    # ---- appends ---------------------------------------------------------------------------

    def prepare(
        self,
        headers: Iterable[BatchHeader],
        first_offset: int,
        log_append_time_ms: int | None = None,
        *,
        check_sequence: bool = True,
    ) -> PendingAppend:
        """Check a client append whose batches will start at `first_offset`.

        With LogAppendTime, `log_append_time_ms` is the max timestamp the batches will carry.
        Without `check_sequence` (a coordinator's write) only epochs are checked.

        Returns the staged updates, or the original batch if one is a retried duplicate.
        Raises InvalidProducerEpochError / OutOfOrderSequenceError; mutates nothing.
        """
        updated: dict[int, ProducerStateEntry] = {}
        offset = first_offset
        for header in headers:
            base, offset = offset, offset + header.last_offset_delta + 1
            if not header.has_producer_id:
                continue
            current = self.producers.get(header.producer_id)
            if (
                check_sequence
                and current is not None
                and (duplicate := current.find_duplicate(header))
            ):
                return PendingAppend(updated, duplicate)
            current = current or ProducerStateEntry(header.producer_id)
            entry = updated.get(header.producer_id) or current.without_batches()
            _check_epoch(entry, header, base)
            if check_sequence:
                _check_sequence(current, entry, header, base)
            entry.add_batch(_as_appended(header, base, log_append_time_ms))
            updated[header.producer_id] = entry
        return PendingAppend(updated)

    def commit(self, pending: PendingAppend, end_offset: int) -> None:
        for producer_id, entry in pending.updated.items():
            current = self.producers.get(producer_id)
            if current is None:
                self.producers[producer_id] = entry
            else:
                current.merge(entry)
        self.map_end_offset = end_offset

    def replay(self, header: BatchHeader) -> None:
        """Apply a batch read back from the log (no validation, as Kafka's REPLICATION origin)."""
        if header.has_producer_id and header.is_control:
            self.complete_txn(header, -1)
        elif header.has_producer_id:
            entry = self.producers.setdefault(
                header.producer_id, ProducerStateEntry(header.producer_id)
            )
            entry.add_batch(header)
        self.map_end_offset = header.next_offset

    def complete_txn(self, marker: BatchHeader, coordinator_epoch: int) -> None:
        """A commit/abort marker ends the producer's open transaction here (Kafka's
        appendEndTxnMarker; -1 keeps the coordinator epoch the entry has)."""
        entry = self.producers.setdefault(
            marker.producer_id, ProducerStateEntry(marker.producer_id)
        )
        entry.maybe_update_epoch(marker.producer_epoch)
        entry.current_txn_first_offset = -1
        entry.last_timestamp = marker.max_timestamp
        if coordinator_epoch >= 0:
            entry.coordinator_epoch = coordinator_epoch
        self.map_end_offset = max(self.map_end_offset, marker.next_offset)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def remove_expired(self, now_ms: int) -> int:
        """Drop producers idle for producer.id.expiration.ms without an open transaction."""
        expired = [pid for pid, entry in self.producers.items() if self._expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def _expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def clear(self, end_offset: int) -> None:
        self.producers.clear()
        self.map_end_offset = end_offset

    # ---- snapshots -------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        if self._snapshots is None:
            self._snapshots = sorted(
                int(name.removesuffix(SNAPSHOT_SUFFIX))
                for name in os.listdir(self.dir)
                if name.endswith(SNAPSHOT_SUFFIX) and name.removesuffix(SNAPSHOT_SUFFIX).isdigit()
            )
        return list(self._snapshots)

    def _forget_snapshot(self, offset: int) -> None:
        _snapshot_path(self.dir, offset).unlink(missing_ok=True)
        if self._snapshots is not None and offset in self._snapshots:
            self._snapshots.remove(offset)

    def take_snapshot(self) -> None:
        """Write `<map end offset>.snapshot` and keep only the newest few."""
        payload = json.dumps(
            {
                "version": SNAPSHOT_VERSION,
                "offset": self.map_end_offset,
                "producers": [_entry_to_json(entry) for entry in self.producers.values()],
            },
            separators=(",", ":"),
        ).encode()
        write_atomically(
            _snapshot_path(self.dir, self.map_end_offset), _CRC.pack(crc32c(payload)) + payload
        )
        offsets = self.snapshot_offsets()
        if self.map_end_offset not in offsets:
            bisect.insort(offsets, self.map_end_offset)
            self._snapshots = offsets
        for offset in offsets[:-SNAPSHOTS_TO_KEEP]:
            self._forget_snapshot(offset)

    def delete_snapshots_after(self, offset: int) -> None:
        """Snapshots beyond the log end describe data that no longer exists."""
        for snapshot in self.snapshot_offsets():
            if snapshot > offset:
                self._forget_snapshot(snapshot)

    def load_latest_snapshot(self, max_offset: int, now_ms: int) -> int | None:
        """Load the newest valid snapshot at or below `max_offset`; returns its offset.

        Newer snapshots are deleted first; unreadable ones are skipped and deleted. The
        directory is listed again (a snapshot may have been put there: a follower's rebuild
        from the remote tier).
        """
        self._snapshots = None
        self.delete_snapshots_after(max_offset)
        for offset in reversed(self.snapshot_offsets()):
            path = _snapshot_path(self.dir, offset)
            try:
                producers = _read_snapshot(path)
            except (ValueError, KeyError, TypeError, OSError) as exc:
                log.warning("%s is unreadable (%s); deleting it", path, exc)
                self._forget_snapshot(offset)
                continue
            self.producers = {e.producer_id: e for e in producers if not self._expired(e, now_ms)}
            self.map_end_offset = offset
            return offset
        self.producers = {}
        return None


def _check_epoch(entry: ProducerStateEntry, header: BatchHeader, offset: int) -> None:
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"Epoch of producer {header.producer_id} at offset {offset} is "
            f"{header.producer_epoch}, which is smaller than the last seen epoch "
            f"{entry.producer_epoch}"
        )


def _check_sequence(
    current: ProducerStateEntry, updated: ProducerStateEntry, header: BatchHeader, offset: int
) -> None:
    """Kafka's ProducerAppendInfo.checkSequence."""
    first_seq, epoch = header.base_sequence, header.producer_epoch
    if epoch != updated.producer_epoch:
        if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for new epoch of producer {header.producer_id} at "
                f"offset {offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                f"{updated.producer_epoch} (current producer epoch)"
            )
        return
    if updated.batches:
        last_seq = updated.last_seq
    elif epoch == current.producer_epoch:
        last_seq = current.last_seq
    else:
        last_seq = NO_SEQUENCE
    if current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
        raise OutOfOrderSequenceError(
            f"Out of order sequence number for producer {header.producer_id} at offset "
            f"{offset}: {first_seq} (incoming seq. number), {last_seq} (current end sequence "
            "number)"
        )


def _as_appended(header: BatchHeader, base_offset: int, append_time: int | None) -> BatchHeader:
    """The header as it will be once the log assigns offsets (and LogAppendTime)."""
    if append_time is None:
        return replace(header, base_offset=base_offset)
    return replace(header, base_offset=base_offset, max_timestamp=append_time)


def _snapshot_path(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _entry_to_json(entry: ProducerStateEntry) -> dict:
    return {
        "producer_id": entry.producer_id,
        "producer_epoch": entry.producer_epoch,
        "last_timestamp": entry.last_timestamp,
        "coordinator_epoch": entry.coordinator_epoch,
        "current_txn_first_offset": entry.current_txn_first_offset,
        "batches": [
            [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
            for b in entry.batches
        ],
    }


def _read_snapshot(path: Path) -> list[ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < _CRC.size or _CRC.unpack_from(data)[0] != crc32c(data[_CRC.size :]):
        raise ValueError("CRC mismatch")
    document = json.loads(data[_CRC.size :])
    if document["version"] != SNAPSHOT_VERSION:
        raise ValueError(f"unknown version {document['version']}")
    entries = []
    for item in document["producers"]:
        entry = ProducerStateEntry(
            item["producer_id"],
            item["producer_epoch"],
            last_timestamp=item["last_timestamp"],
            coordinator_epoch=item["coordinator_epoch"],
            current_txn_first_offset=item["current_txn_first_offset"],
        )
        entry.batches.extend(BatchMetadata(*batch) for batch in item["batches"])
        entries.append(entry)
    return entries
