"""One partition's delay store: its held records, durably, until they are due (RocketMQ's
schedule topic, one per partition).

The store is a UnifiedLog in the partition's directory (`<topic>-<p>/delayed/`), written with
the partition's log config: the same validation, segments and crash recovery. It holds:

- held batches, as produced (so its producer state deduplicates retries exactly as the
  partition's would), each right after a record of the store's own with their due times, in
  one append (broker/delayed_delivery.py);
- release intents: "these held records go to partition P at offset T" (P: this store's
  partition, or for a retry topic the target's or dead-letter topic's; T: P's log end),
  written just before the append to P, in the same synchronous step;
- cancellations: the partition append of the previous intent failed;
- forwarded releases (a retry topic's, to another topic's partition): the intent names the
  broker-owned idempotent producer (id, epoch, base sequence) the records are appended
  with, and a Forwarded record follows once they were; one at a time, so a store opened
  with an intent not followed by its Forwarded resends it with the same producer and
  sequence, and the target's producer state drops it if it was appended already
  (broker/release_forwarding.py);
- transaction ends: a transactional producer's held records become due (commit) or go
  (abort), written when its marker reaches the partition, before the marker.

Every store batch carries the partition's leader epoch (the store's leader epoch cache
follows the partition's leaders), so a follower's copy of the store can be truncated by
leader epoch as the partition's is (broker/delay_store_replica.py).

So every intent but the last one with no cancellation after it was appended; the last one was
iff P's log end is beyond T (nothing else writes the partition between the two
writes, and a restart checks this before the broker serves). A record is thus released once,
also when the broker dies between the two writes. What is due is found through the store's
due-time index (broker/delayed_due_index.py: on disk, only the records due within a horizon
in memory), checkpointed every INDEX_CHECKPOINT_INTERVAL_MS and by a clean close; an open
indexes the store written after the checkpoint again (after a crash, or a close with a
release unresolved), so memory does not grow with the held records; a transaction's held
records are indexed when it commits (kept in memory until then, and in the checkpoint).
The store's prefix whose records were all released is deleted as the log start moves, and
with it the index files whose entries were all released.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkalite.broker.delayed_delivery import (
    Dues,
    Forwarded,
    Intent,
    ReleaseProducer,
    TxnEnd,
    decode_marker,
    encode_cancel,
    encode_dues,
    encode_forwarded,
    encode_intent,
    encode_txn_end,
)
from kafkalite.broker.delayed_due_index import DueIndex, Entry, Rebuild, bucket_of
from kafkalite.storage.batch import BatchHeader, iter_batches, parse_header
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log import AppendResult, LogConfig, UnifiedLog
from kafkalite.storage.records import Record, decode_records

log = logging.getLogger("kafkalite.delayed_delivery")

STORE_DIR = "delayed"
STORE_SEGMENT_BYTES = 64 * 1024**2
PRODUCER_EXPIRATION_CHECK_MS = 60_000
# A crash re-indexes the store from the last checkpoint of its index on (Kafka's recovery point).
INDEX_CHECKPOINT_INTERVAL_MS = 30_000
INDEX_SYNCS_PER_ROUND = 8  # index files fsynced per release round (not many at once)
STORE_MAX_BATCH_BYTES = 2**31 - 1  # produced batches are checked against the topic's limit
_READ_BYTES = 1024**2
DECODED_RECORDS = 50_000  # records of recently read held batches kept decoded
_HELD_READ_BYTES = 16 * 1024  # the batch holding a due record (at least that one)


def store_config(topic_config: LogConfig) -> LogConfig:
    """The partition's config (validation as for the partition), never retained by time or
    size: only released records go, by the store's own log start."""
    return replace(
        topic_config,
        retention_ms=-1,
        retention_bytes=-1,
        segment_bytes=min(topic_config.segment_bytes, STORE_SEGMENT_BYTES),
        max_message_bytes=STORE_MAX_BATCH_BYTES,
        compression_type="producer",
    )


def store_dir(partition_dir: Path) -> Path:
    return partition_dir / STORE_DIR


@dataclass(frozen=True)
class TakeOver:
    """A new leader opening its copy of a replicated store (broker/delay_store_replica.py)."""

    partition: tuple[str, int]  # the store's own partition
    leader_epoch: int  # its new epoch: the cancellations written are in it


@dataclass(eq=False)
class DecodedBatches:
    """The records of recently read store batches, least recently used out first, at most
    `capacity` records."""

    capacity: int
    batches: OrderedDict[int, list[Record]] = field(default_factory=OrderedDict)
    by_offset: dict[int, Record] = field(default_factory=dict)

    def get(self, offset: int) -> Record | None:
        return self.by_offset.get(offset)

    def put(self, records: list[Record]) -> None:
        if not records or records[0].offset in self.by_offset:
            return
        self.batches[records[0].offset] = records
        self.by_offset.update((record.offset, record) for record in records)
        while len(self.by_offset) > self.capacity and len(self.batches) > 1:
            for record in self.batches.popitem(last=False)[1]:
                self.by_offset.pop(record.offset, None)


@dataclass(eq=False)
class DelayStore:
    log: UnifiedLog
    index: DueIndex  # which held records are due when (broker/delayed_due_index.py)
    released: int = 0  # records released since opened
    # Held records of transactions not ended yet, by producer id: not due before the commit
    # (indexed then).
    open_txns: dict[int, list[Entry]] = field(default_factory=dict)
    # Due order is not store order: a held batch is read once for all its records.
    decoded: DecodedBatches = field(default_factory=lambda: DecodedBatches(DECODED_RECORDS))
    failed: bool = False  # a cancellation could not be written: no more releases here
    intent_open: bool = False  # an intent neither confirmed nor cancelled yet
    next_expiry_ms: int = 0  # when to look for expired producers next
    next_checkpoint_ms: int = 0  # when to checkpoint the index next
    paused_until_ms: int = 0  # see pause
    # Releases to the store's own partition beyond its high watermark: (the partition offset
    # they end before, the store's low before them); see trim.
    unreplicated: deque[tuple[int, int]] = field(default_factory=deque)
    # The forwarded release not known to be done (resent with its producer and sequence).
    forwarding: Intent | None = None
    # The producer this store's forwarded releases are appended with since it was opened (a
    # new one each open: the sequences of an earlier one may be in trimmed intents only),
    # and its next sequence per target partition.
    producer_id: int = -1
    resumed_held: int = 0  # the records of `forwarding` when found by open (not indexed)
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        partition_dir: Path,
        topic_config: LogConfig,
        now_ms: int,
        log_end: Callable[[tuple[str, int]], int | None],
        taking_over: TakeOver | None = None,
    ) -> DelayStore:
        """`log_end`: a partition's log end offset (None: no such partition here).
        `taking_over`: opened by a new leader from its copy of a replicated store (all of
        it indexed again; every release to the store's own partition resolved)."""
        directory = store_dir(partition_dir)
        store_log = UnifiedLog.open(directory, store_config(topic_config), now_ms=now_ms)
        start, end = store_log.log_start_offset, store_log.log_end_offset
        found = None if taking_over else DueIndex.open_checkpointed(directory, start, end)
        if found is None:  # none, torn, or older than the store's log start: all again
            store = cls(store_log, DueIndex.create(directory))
            store._recover(log_end, start, now_ms, whole=True, taking_over=taking_over)
        else:
            index, checkpoint = found
            store = cls(store_log, index, open_txns=checkpoint.open_txns)
            if checkpoint.log_end < end:  # a crash: what came after it
                store._recover(log_end, checkpoint.log_end, now_ms, whole=False)
        store.index.advance(now_ms)
        return store

    # -- loading ----------------------------------------------------------------------------

    def _batches(self, offset: int, max_bytes: int) -> Iterator[memoryview]:
        """Whole batches from the one holding `offset` on, up to the store's log end."""
        end = self.log.log_end_offset
        while offset < end:
            data = memoryview(self.log.read(offset, max_bytes, end))
            before = offset
            for position, header in iter_batches(data):
                yield data[position : position + header.size]
                offset = header.next_offset
            if offset == before:
                return

    def _recover(
        self,
        log_end: Callable[[tuple[str, int]], int | None],
        start: int,
        now_ms: int,
        whole: bool,
        taking_over: TakeOver | None = None,
    ) -> None:
        """Index the store from `start` on (its files are the truth; the index, if not
        `whole`, is its checkpoint's): every intent's records were released but the last
        one's if it was cancelled or did not reach its partition. A checkpoint of the result
        is begun (written as the release rounds sync its files).

        Taking over a replicated store, the intents of releases to its own partition are
        resolved each (not only the last: an old leader's last releases may not have reached
        this replica's partition): applied iff the partition's log end is beyond the
        intent's offset (the fences make this replica's partition a prefix of the leaders'
        that wrote them); those that were not are cancelled in the store, so that no later
        leader finds them applied once the partition has grown past their offsets."""
        own = taking_over.partition if taking_over is not None else None
        unresolved: dict[int, Intent] = {}  # own releases not cancelled, by intent offset
        rebuild = Rebuild(self.index)
        last: Intent | None = None
        mark = 0  # where the last intent's records begin among the released
        forward: Intent | None = None  # the last forwarded release not done
        forward_mark = 0
        dues: Dues | None = None
        open_txns = self.open_txns
        latest_ms = now_ms  # when the last release can have been
        for batch in self._batches(start, _READ_BYTES):
            header = parse_header(batch)
            if dues is not None and _holds(dues, header):
                entries = [
                    (due, header.base_offset + i, dues.offset) for i, due in enumerate(dues.due_ms)
                ]
                if header.is_transactional:
                    open_txns.setdefault(header.producer_id, []).extend(entries)
                else:
                    rebuild.add(entries)
                dues = None
                continue
            dues = None
            latest_ms = max(latest_ms, header.max_timestamp)
            for record in decode_records(batch):  # the store's own
                marker = decode_marker(record)
                if isinstance(marker, Dues):
                    dues = marker
                elif isinstance(marker, TxnEnd):
                    ended = open_txns.pop(marker.producer_id, [])
                    if marker.commit:
                        rebuild.add(ended)
                elif isinstance(marker, Intent) and marker.producer is not None:
                    forward, forward_mark, last = marker, len(rebuild.released), None
                    rebuild.note_released(marker.store_offsets)
                elif isinstance(marker, Forwarded):
                    forward = None
                elif forward is not None and marker == forward.offset:
                    rebuild.forget_released_since(forward_mark)
                    forward = None
                elif isinstance(marker, Intent) and marker.target == own:
                    unresolved[marker.offset] = marker
                elif isinstance(marker, Intent):
                    last, mark = marker, len(rebuild.released)
                    rebuild.note_released(marker.store_offsets)
                elif isinstance(marker, int) and marker in unresolved:
                    del unresolved[marker]
                elif last is not None and marker == last.offset:
                    rebuild.forget_released_since(mark)
                    last = None
        target_end = log_end(last.target) if last is not None else None
        if last is not None and (target_end is None or target_end <= last.target_offset):
            log.info(
                "%s: release to %s at %d did not reach it (log end %s): held again",
                self.log.dir,
                last.target,
                last.target_offset,
                target_end,
            )
            rebuild.forget_released_since(mark)
        cancels = self._resolve(unresolved, log_end(own) if own is not None else None, rebuild)
        self.forwarding, self.intent_open = forward, forward is not None
        self.resumed_held = len(forward.store_offsets) if forward is not None else 0
        up_to = None if whole else bucket_of(latest_ms)
        self.index = rebuild.finish(self.log.log_start_offset, up_to)
        self.index.begin_checkpoint(self.log.log_end_offset, self.open_txns)
        log.info(
            "%s: due-time index %s, store offsets %d to %d read again, %d records held",
            self.log.dir,
            "rebuilt" if whole else "recovered from its checkpoint",
            start,
            self.log.log_end_offset,
            self.held_count,
        )
        if taking_over is not None:
            try:
                for intent in cancels:  # before anything else is written in the new epoch
                    self.write_cancel(intent, now_ms, taking_over.leader_epoch)
            except StorageError as exc:
                # Another release after these would let a later leader take them for done.
                log.error("%s: cannot cancel a release, releases stop: %s", self.log.dir, exc)
                self.failed = True

    def _resolve(
        self, unresolved: dict[int, Intent], partition_end: int | None, rebuild: Rebuild
    ) -> list[int]:
        """Note the applied releases of `unresolved` as released; return the others."""
        cancels = []
        for intent in unresolved.values():
            if partition_end is not None and partition_end > intent.target_offset:
                rebuild.note_released(intent.store_offsets)
            else:
                log.info(
                    "%s: release to %s at %d did not reach it here (log end %s): held again",
                    self.log.dir,
                    intent.target,
                    intent.target_offset,
                    partition_end,
                )
                cancels.append(intent.offset)
        return cancels

    @property
    def held_count(self) -> int:
        """Held records: indexed, waiting for their transaction to end, or being forwarded."""
        txns = sum(len(entries) for entries in self.open_txns.values())
        return self.index.held + txns + self.resumed_held

    # -- holding ----------------------------------------------------------------------------

    def hold(
        self, batch: bytes, header: BatchHeader, dues: Sequence[int], leader_epoch: int, now_ms: int
    ) -> AppendResult:
        """Append a produced batch with its due times (raises a StorageError); a deduplicated
        retry holds nothing. The result's offsets are the batch's in the store."""
        appended = self.log.append_as_leader(
            encode_dues(header, dues, now_ms) + batch, leader_epoch, now_ms
        )
        if appended.duplicate:
            return appended
        dues_offset, first = appended.first_offset, appended.first_offset + 1
        entries = [(due, first + index, dues_offset) for index, due in enumerate(dues)]
        if header.is_transactional:  # released once its transaction commits
            self.open_txns.setdefault(header.producer_id, []).extend(entries)
        else:
            self.index.add(entries)
        return replace(appended, first_offset=first)

    def end_txn(self, producer_id: int, commit: bool, now_ms: int, leader_epoch: int = -1) -> int:
        """The producer's transaction ended (raises a StorageError if that cannot be
        written): its held records become due as asked (commit) or are dropped (abort).
        Returns how many were dropped."""
        if producer_id not in self.open_txns:
            return 0
        self.log.append_as_leader(
            encode_txn_end(producer_id, commit, now_ms), leader_epoch, now_ms, coordinator=True
        )
        entries = self.open_txns.pop(producer_id)
        if commit:
            self.index.add(entries)
            return 0
        return len(entries)

    @property
    def next_due_ms(self) -> int | None:
        due = self.index.next_due_ms
        return max(due, self.paused_until_ms) if due is not None else None

    def pause(self, until_ms: int) -> None:
        """Releases got nowhere (their partitions are not led here): none before then."""
        self.paused_until_ms = until_ms

    def take_due(self, now_ms: int, max_records: int) -> list[tuple[int, int]]:
        """Up to `max_records` due (due, offset) entries, earliest first (give them back with
        `restore`, or mark them released with `confirm`)."""
        if now_ms < self.paused_until_ms:
            return []
        return self.index.take_due(now_ms, max_records)

    def advance(self, now_ms: int) -> None:
        """Move the index's in-memory horizon with the clock."""
        self.index.advance(now_ms)

    def read_held(self, offsets: Sequence[int]) -> list[Record]:
        """The held records at these store offsets (ascending), due header included."""
        found: list[Record] = []
        for offset in offsets:
            record = self.decoded.get(offset)
            if record is None:
                batch = next(self._batches(offset, _HELD_READ_BYTES), None)
                if batch is None:
                    continue
                self.decoded.put(decode_records(batch))
                record = self.decoded.get(offset)
            if record is not None:
                found.append(record)
        return found

    def restore(self, entries: Sequence[tuple[int, int]]) -> None:
        self.index.restore(entries)

    # -- releasing --------------------------------------------------------------------------

    def write_intent(
        self,
        target: tuple[str, int],
        target_offset: int,
        offsets: Sequence[int],
        now_ms: int,
        leader_epoch: int = -1,
        producer: ReleaseProducer | None = None,
    ) -> int:
        """Raises a StorageError; returns the intent's store offset. With `producer`: a
        forwarded release (see `forwarding`)."""
        batch = encode_intent(target, target_offset, offsets, now_ms, producer)
        appended = self.log.append_as_leader(batch, leader_epoch, now_ms, coordinator=True)
        intent = appended.first_offset
        self.intent_open = True
        if producer is not None:
            self.forwarding = Intent(intent, target, target_offset, tuple(offsets), producer)
            # (wraps as Kafka's producer sequences do)
            self.sequences[target] = (producer.base_sequence + len(offsets)) & 0x7FFFFFFF
        return intent

    def next_producer(self, target: tuple[str, int]) -> ReleaseProducer:
        """The producer and base sequence of the next forwarded release to `target`
        (`producer_id` set first)."""
        return ReleaseProducer(self.producer_id, 0, self.sequences.get(target, 0))

    def write_forwarded(self, now_ms: int, leader_epoch: int = -1) -> None:
        """The forwarded release is done (raises a StorageError: it stays open then)."""
        forwarding = self.forwarding
        if forwarding is None:
            return
        self.log.append_as_leader(
            encode_forwarded(forwarding.offset, now_ms), leader_epoch, now_ms, coordinator=True
        )
        self.forwarding = None
        self.intent_open = False
        self.resumed_held = 0

    def write_cancel(self, intent_offset: int, now_ms: int, leader_epoch: int = -1) -> None:
        self.log.append_as_leader(
            encode_cancel(intent_offset, now_ms), leader_epoch, now_ms, coordinator=True
        )
        self.intent_open = False

    def confirm(self, offsets: Sequence[int]) -> None:
        for offset in offsets:
            self.index.remove(offset)
        self.released += len(offsets)
        self.intent_open = False

    def maintain(self, now_ms: int, partition_high_watermark: int | None = None) -> None:
        """After a release round: trim, and now and then forget expired producers (Kafka's
        producer.id.expiration.ms, as for a partition)."""
        self.trim(partition_high_watermark)
        index = self.index
        if index.pending is None and now_ms >= self.next_checkpoint_ms and not self.intent_open:
            index.begin_checkpoint(self.log.log_end_offset, self.open_txns)
            self.next_checkpoint_ms = now_ms + INDEX_CHECKPOINT_INTERVAL_MS
        index.continue_checkpoint(INDEX_SYNCS_PER_ROUND)
        if now_ms >= self.next_expiry_ms:
            self.log.remove_expired_producers(now_ms)
            self.next_expiry_ms = now_ms + PRODUCER_EXPIRATION_CHECK_MS

    def update_config(self, topic_config: LogConfig) -> None:
        self.log.update_config(store_config(topic_config))

    def trim(self, partition_high_watermark: int | None = None) -> None:
        """Move the log start past every released record (their segments go): to the dues
        record of the lowest held one. Replicated (`partition_high_watermark` given), not
        past a release the partition's high watermark does not cover yet: a follower's
        copy follows this log start, and must keep the records until its partition has them."""
        low = self._low()
        kept = self.unreplicated
        if partition_high_watermark is None:
            kept.clear()
        while kept and partition_high_watermark is not None:
            if kept[0][0] > partition_high_watermark:
                break
            kept.popleft()
        if kept:
            low = min(low, kept[0][1])
        if low > self.log.log_start_offset:
            self.log.delete_records_before(low)

    def _low(self) -> int:
        """The dues record of the lowest held record (the log end when none is held)."""
        lows = [entries[0][2] for entries in self.open_txns.values() if entries]  # store order
        if self.forwarding is not None:  # its records are read again to resend it
            lows.append(min(self.forwarding.store_offsets) - 1)
        index_low = self.index.low_dues_offset()
        if index_low is not None:
            lows.append(index_low)
        return min(lows, default=self.log.log_end_offset)

    def keep_until_replicated(self, partition_end: int) -> None:
        """Before a release to the store's own partition is confirmed: the store keeps what
        it holds now until the partition's high watermark reaches `partition_end`."""
        self.unreplicated.append((partition_end, self._low()))

    def close(self) -> None:
        """A clean close checkpoints the index (unless a release is unresolved: then the
        next open indexes the store from the last checkpoint on, resolving it)."""
        self.log.close()
        if self.failed or self.intent_open:
            self.index.close()
        else:
            self.index.write_checkpoint(self.log.log_end_offset, self.open_txns)
            self.index.files.close()

    def delete(self) -> None:
        self.index.files.close()
        self.log.delete()


def _holds(dues: Dues, header: BatchHeader) -> bool:
    """Whether the batch is the one the Dues record was written with."""
    return (
        header.base_offset == dues.offset + 1
        and header.crc == dues.crc
        and header.records_count == len(dues.due_ms)
    )
