"""Delayed delivery's part of the data path: a produce to a topic that opted in, and the
release of due records (broker/delayed_delivery.py says what is held; the partitions' delay
stores, broker/delayed_delivery_store.py, keep it).

A produced batch of an opted-in topic is looked into (topics that did not opt in never get
here): decompressed, and decoded only if a header name may be in it. It is appended to its
partition as sent when none of its records waits and its producer is not idempotent.
Otherwise it is appended to the partition's delay store first (its producer state
deduplicates idempotent retries, so every batch of an idempotent producer goes there,
keeping its sequence numbers in one place), and its records already due are released at
once, in the same step. Held records are released by `release_due`, which the server calls
at least every `kafkalite.delayed.delivery.precision.ms`.

A transactional producer's batches go to the store too; its records are held until the
transaction's marker reaches the partition: then they are due as asked (commit) or dropped
(abort). A retry topic's records all go to the store and are released to its target or
dead-letter topic (broker/retry_topics.py). In partitions with several replicas the
store is replicated with the partition (broker/delay_store_replica.py). A retry topic's
records move with an idempotent producer of its own, appended here or sent to the target's
leader, exactly once (broker/release_forwarding.py).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.delay_store_replica import (
    StoreFollowers,
    StoreLeader,
    follow,
    open_store_copy,
)
from kafkalite.broker.delayed_delivery import (
    DelaySettings,
    Intent,
    batch_due_times,
    encode_released,
    settings_for,
)
from kafkalite.broker.delayed_delivery_store import (
    DelayStore,
    TakeOver,
    store_config,
    store_dir,
)
from kafkalite.broker.delayed_due_index import INDEX_DIR
from kafkalite.broker.partition import Partition
from kafkalite.broker.release_forwarding import STUCK_ERRORS, PendingForward, answer_outcome
from kafkalite.broker.retry_topics import route
from kafkalite.broker.topic_config import effective_value
from kafkalite.config import BrokerConfig
from kafkalite.metrics.counters import LatencyHistogram
from kafkalite.storage.batch import HEADER_SIZE, InvalidBatch, validate_batches
from kafkalite.storage.errors import InvalidRecordError, StorageError, from_invalid_batch
from kafkalite.storage.log import AppendResult, LogConfig
from kafkalite.storage.records import Record

log = logging.getLogger("kafkalite.delayed_delivery")

TopicPartition = tuple[str, int]
Appended = AppendResult | StorageError | ErrorCode
MAX_RELEASE_RECORDS = 500  # records per released batch
PAUSE_MS = 1000  # before trying again a store whose release got nowhere or failed
# Errors of a released batch that a retry cannot cure: its records are dropped (logged).
_UNRELEASABLE = (
    ErrorCode.invalid_record,
    ErrorCode.invalid_timestamp,
    ErrorCode.corrupt_message,
    ErrorCode.message_too_large,  # one record, larger than the topic's limit became
)
RECORD_OVERHEAD = 40  # a record's length, attributes, deltas and field lengths at most


@dataclass
class DelayedDelivery:
    config: Callable[[], BrokerConfig]  # the broker's current config (dynamic configs)
    partition_of: Callable[[TopicPartition], Partition | None]  # this broker's replicas
    topics: Callable[[], Mapping[str, TopicMetadata]]  # the cluster's topics
    stores: dict[TopicPartition, DelayStore] = field(default_factory=dict)
    released: int = 0  # records released since start
    dropped: int = 0  # due records their partition refused (logged)
    aborted: int = 0  # held records dropped with their aborted transaction
    lateness: LatencyHistogram = field(default_factory=LatencyHistogram)  # release - due, ms
    # Partitions a produce's records were released to at once (the caller wakes their
    # parked fetches and empties it).
    moved: set[TopicPartition] = field(default_factory=set)
    # The store offset a produce's held batch ends before (its acks=all waits for the store
    # high watermark to reach it; -1: nothing held). The caller reads and resets it.
    held_until: int = -1
    _settings: dict[str, tuple[object, object, DelaySettings]] = field(default_factory=dict)
    # The followers' copies of the stores this broker leads (broker/delay_store_replica.py).
    _followers: dict[TopicPartition, StoreFollowers] = field(default_factory=dict)
    # This broker's copies of the stores of partitions it follows (no DelayStore open).
    copies: dict[TopicPartition, Partition] = field(default_factory=dict)
    # Forwarded releases (a retry topic's) by their store's partition; those to partitions
    # led elsewhere are in `outbox` too until the sender takes them.
    allocate_producer_id: Callable[[], int] | None = None  # the cluster's InitProducerId's
    min_insync_replicas: Callable[[TopicPartition], int] = lambda _: 1
    wake_sender: Callable[[], None] | None = None  # set by the sender (cluster mode only)
    forwards: dict[TopicPartition, PendingForward] = field(default_factory=dict)
    outbox: list[tuple[TopicPartition, PendingForward]] = field(default_factory=list)

    # -- settings ---------------------------------------------------------------------------

    def settings(self, topic: str, overrides: Mapping[str, str]) -> DelaySettings:
        """The topic's settings, recomputed only when its configs or the broker's change."""
        broker = self.config()
        cached = self._settings.get(topic)
        if cached is not None and cached[0] is overrides and cached[1] is broker:
            return cached[2]
        settings = settings_for(broker, overrides)
        self._settings[topic] = (overrides, broker, settings)
        return settings

    # -- stores -----------------------------------------------------------------------------

    def load(self, partitions: Mapping[TopicPartition, Partition], now_ms: int) -> None:
        """Open the stores partitions already have (before the broker serves: a release
        interrupted by a crash is resolved against the partition's log end)."""
        for tp, partition in partitions.items():
            if tp in self.copies or not store_dir(partition.log.dir).is_dir():
                continue
            if self._replicated(partition) and partition.is_leader:
                self.take_over(partition, now_ms)  # it may have been a follower before
            else:
                self._open(tp, partition, now_ms)
        held = sum(store.held_count for store in self.stores.values())
        if self.stores:
            log.info("%d delay stores opened, %d records held", len(self.stores), held)

    def open_store(self, partition: Partition, now_ms: int) -> None:
        """Open the partition's store again where its directory now is (after close_store):
        its copy's log if it is followed here (the fetcher keeps the same copy)."""
        tp = (partition.topic, partition.index)
        copy = self.copies.get(tp)
        if copy is None:
            self._open(tp, partition, now_ms)
        else:
            copy.log = open_store_copy(partition, now_ms).log

    def take_over(self, partition: Partition, now_ms: int) -> None:
        """This broker leads the partition now, after following it: its store is opened
        from the copy, every release to the partition resolved (DelayStore's TakeOver)."""
        tp = (partition.topic, partition.index)
        self.stop_copying(tp)
        if tp in self.stores:
            return
        shutil.rmtree(store_dir(partition.log.dir) / INDEX_DIR, ignore_errors=True)
        self.stores[tp] = DelayStore.open(
            partition.log.dir,
            partition.log.config,
            now_ms,
            self._log_end,
            TakeOver(tp, partition.leader_epoch),
        )

    def close_store(self, tp: TopicPartition) -> bool:
        """Close the partition's store or its copy (its directory moves); whether it had
        one."""
        self._followers.pop(tp, None)
        self.forwards.pop(tp, None)
        copy = self.copies.get(tp)
        if copy is not None:
            copy.log.close()
            return True
        store = self.stores.pop(tp, None)
        if store is not None:
            store.close()
        return store is not None

    def _open(self, tp: TopicPartition, partition: Partition, now_ms: int) -> DelayStore:
        store = self.stores.get(tp)
        if store is None:
            self.stop_copying(tp)  # led here now: the copy's log is the store's
            store = DelayStore.open(partition.log.dir, partition.log.config, now_ms, self._log_end)
            self.stores[tp] = store
        return store

    def _log_end(self, tp: TopicPartition) -> int | None:
        partition = self.partition_of(tp)
        return partition.log_end_offset if partition is not None else None

    def store_leader(self, tp: TopicPartition, now_ms: int) -> StoreLeader | ErrorCode:
        """The store of partition `tp` as its leader serves it to followers (opened if it
        was not: an opted-in partition's leader has one). UNKNOWN_TOPIC_OR_PARTITION for a
        topic that did not opt in, NOT_LEADER_OR_FOLLOWER where `tp` is not led here."""
        partition = self.partition_of(tp)
        meta = self.topics().get(tp[0])
        if partition is None or meta is None or not self.settings(tp[0], meta.configs).active:
            return ErrorCode.unknown_topic_or_partition
        if not partition.is_leader:
            return ErrorCode.not_leader_or_follower
        store = self._open(tp, partition, now_ms)
        followers = self._followers.get(tp)
        new_epoch = followers is None or followers.leader_epoch != partition.leader_epoch
        if followers is None or new_epoch:
            followers = self._followers[tp] = StoreFollowers(partition.leader_epoch)
        leader = StoreLeader(partition, store.log, followers)
        if new_epoch:
            leader.begin_epoch()
        leader.maybe_increment_high_watermark()
        return leader

    def copy_store(self, partition: Partition, now_ms: int) -> Partition | None:
        """P is followed here: its store's copy (opened if needed, with P's new state), for
        the replica fetcher to fetch with P; None when the topic keeps no store or stores
        are not replicated yet. A store led here until now is closed (its log goes on as the
        copy's)."""
        tp = (partition.topic, partition.index)
        meta = self.topics().get(tp[0])
        if meta is None:
            return None
        if not self.settings(tp[0], meta.configs).active:
            return None
        copy = self.copies.get(tp)
        if copy is None:
            self.close_store(tp)  # led here until now
            copy = self.copies[tp] = open_store_copy(partition, now_ms)
        else:
            follow(copy, partition)
        return copy

    def stop_copying(self, tp: TopicPartition) -> Partition | None:
        """P is no longer followed here: close its store's copy (returned, if there was
        one, for the fetcher to forget)."""
        copy = self.copies.pop(tp, None)
        if copy is not None:
            copy.log.close()
        return copy

    def read_cap(self, tp: TopicPartition, replica_id: int) -> int | None:
        """Where a follower's read of partition `tp` stops until its copy of the store has
        the intents of the releases beyond (StoreFollowers' fences); None: no limit."""
        if tp not in self.stores:  # (a dict lookup first: this runs for every partition of
            return None  # every follower fetch)
        leader = self.store_leader(tp, 0)
        return leader.read_cap(replica_id) if isinstance(leader, StoreLeader) else None

    def store_in_sync(self, tp: TopicPartition, replica_id: int, partition_offset: int) -> bool:
        """Whether a follower of partition `tp` led here may join its ISR as far as the
        store goes (StoreLeader.in_sync); True where there is no store."""
        if tp not in self.stores:
            return True
        leader = self.store_leader(tp, 0)
        return not isinstance(leader, StoreLeader) or leader.in_sync(replica_id, partition_offset)

    def store_high_watermark(self, tp: TopicPartition) -> int:
        """The store high watermark of partition `tp` led here (-1 if it has no store or is
        not led here): the smallest store log end over its ISR."""
        if tp not in self.stores:
            return -1
        leader = self.store_leader(tp, 0)
        return leader.followers.high_watermark if isinstance(leader, StoreLeader) else -1

    def store_replication_lag(self) -> dict[TopicPartition, int]:
        """Store offsets not yet in every ISR copy (store log end - store high watermark),
        per replicated partition led here (a metric; no store opened or epoch begun)."""
        lags: dict[TopicPartition, int] = {}
        for tp, store in self.stores.items():
            partition = self.partition_of(tp)
            if partition is None or not partition.is_leader or not self._replicated(partition):
                continue
            followers = self._followers.get(tp)
            known = followers is not None and followers.leader_epoch == partition.leader_epoch
            high_watermark = followers.high_watermark if followers is not None and known else 0
            log_ = store.log
            lags[tp] = log_.log_end_offset - max(high_watermark, log_.log_start_offset)
        return lags

    def update_config(self, tp: TopicPartition, topic_config: LogConfig) -> None:
        """The partition's log config changed: its store (or copy) validates with it too."""
        store = self.stores.get(tp)
        if store is not None:
            store.update_config(topic_config)
        copy = self.copies.get(tp)
        if copy is not None:
            copy.log.update_config(store_config(topic_config))

    def forget(self, tp: TopicPartition) -> None:
        """The partition is deleted here: its held records go with it."""
        self._followers.pop(tp, None)
        self.forwards.pop(tp, None)
        copy = self.copies.pop(tp, None)
        if copy is not None:
            copy.log.delete()
        store = self.stores.pop(tp, None)
        if store is not None:
            store.delete()

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores.clear()
        for copy in self.copies.values():
            copy.log.close()
        self.copies.clear()

    @property
    def held(self) -> int:
        return sum(store.held_count for store in self.stores.values())

    def next_due_ms(self) -> int | None:
        dues = [store.next_due_ms for store in self.stores.values() if not store.failed]
        return min((due for due in dues if due is not None), default=None)

    # -- produce ----------------------------------------------------------------------------

    def append(
        self,
        partition: Partition,
        records: bytes,
        settings: DelaySettings,
        required_acks: int,
        min_isr: int,
        now_ms: int,
    ) -> Appended:
        """A produce to an opted-in topic: held, released at once, or appended as sent."""

        def as_sent() -> Appended:
            return partition.append_records_to_leader(records, required_acks, min_isr, now_ms)

        if not partition.is_leader:
            return ErrorCode.not_leader_or_follower
        try:
            headers = validate_batches(records, partition.log.config.max_message_bytes)
        except InvalidBatch as exc:
            return from_invalid_batch(exc)
        header = headers[0]
        if len(headers) != 1 or header.is_control:
            return as_sent()  # refused there, as for any topic
        try:
            dues = batch_due_times(records, header, settings, now_ms)
        except StorageError as exc:
            return exc
        # A retry topic's records all move elsewhere, through the store.
        moving = settings.retry is not None or any(due > now_ms for due in dues)
        if not moving and not header.has_producer_id:
            return as_sent()
        refusal = self._missing_topic(settings)
        if refusal is not None:
            return InvalidRecordError(refusal) if moving else as_sent()
        if required_acks == -1 and len(partition.isr) < partition.effective_min_isr(min_isr):
            return ErrorCode.not_enough_replicas
        store = self._open((partition.topic, partition.index), partition, now_ms)
        try:
            held = store.hold(records, header, dues, partition.leader_epoch, now_ms)
        except StorageError as exc:
            return exc
        if held.duplicate:
            return AppendResult(-1, -1, -1, partition.log_start_offset, duplicate=True)
        self.held_until = held.last_offset + 1
        placed = self._release(partition, store, now_ms, self.moved)
        return _answer(partition, held, placed)

    # -- transactions -----------------------------------------------------------------------

    def end_txn(
        self, partition: Partition, producer_id: int, commit: bool, now_ms: int
    ) -> StorageError | None:
        """Before a transaction's marker is appended to the partition: the producer's held
        records become due (released at once if they are) or are dropped."""
        tp = (partition.topic, partition.index)
        store = self.stores.get(tp)
        if store is None or producer_id not in store.open_txns:
            return None
        try:
            self.aborted += store.end_txn(producer_id, commit, now_ms, partition.leader_epoch)
        except StorageError as exc:
            return exc
        if self._replicated(partition):  # followers get the marker with the end in the store
            self._fence(tp, partition.log_end_offset, store.log.log_end_offset)
        return None

    # -- release ----------------------------------------------------------------------------

    def release_due(self, now_ms: int) -> set[TopicPartition]:
        """Release every due record of the partitions this broker leads; returns the
        partitions appended to."""
        appended: set[TopicPartition] = set()
        for tp, store in list(self.stores.items()):
            partition = self.partition_of(tp)
            if partition is None or not partition.is_leader or store.failed:
                continue
            self._release(partition, store, now_ms, appended)
            store.maintain(now_ms, partition.high_watermark)
        return appended

    def release_partition(self, partition: Partition, now_ms: int) -> set[TopicPartition]:
        """Release what is due in one partition now (a committed transaction's records)."""
        appended: set[TopicPartition] = set()
        store = self.stores.get((partition.topic, partition.index))
        if store is not None and not store.failed:
            self._release(partition, store, now_ms, appended)
        return appended

    def _release(
        self,
        source: Partition,
        store: DelayStore,
        now_ms: int,
        appended: set[TopicPartition] | None = None,
    ) -> dict[int, int]:
        """Due records of one store, batch by batch; returns store offset -> offset of the
        records released to the store's own partition, and adds the partitions appended to
        to `appended`."""
        placed: dict[int, int] = {}
        appended = set() if appended is None else appended
        if store.forwarding is not None and not self._forward(source, store, now_ms, appended):
            return placed  # a forwarded release first
        while taken := store.take_due(now_ms, MAX_RELEASE_RECORDS):
            if not self._release_round(source, store, taken, now_ms, placed, appended):
                store.pause(now_ms + PAUSE_MS)  # (not every round of the timer)
                break
            if store.forwarding is not None and not self._forward(source, store, now_ms, appended):
                break
        return placed

    def _release_round(
        self,
        source: Partition,
        store: DelayStore,
        taken: list[tuple[int, int]],
        now_ms: int,
        placed: dict[int, int],
        appended: set[TopicPartition],
    ) -> bool:
        """Release the taken records, a batch per destination; whether to go on."""
        found = {r.offset: r for r in store.read_held(sorted(offset for _, offset in taken))}
        missing = [offset for _, offset in taken if offset not in found]
        if missing:  # not in the store: nothing to release for them
            log.error("%s: %d held records not found", store.log.dir, len(missing))
            store.confirm(missing)
        progress, stopped = bool(missing), False
        own = (source.topic, source.index)
        for tp, (entries, records) in self._routes(source, taken, found).items():
            if stopped or store.forwarding is not None:
                store.restore(entries)  # (one forwarded release at a time)
            elif tp is None:  # its topic is gone
                self._drop(store, entries, f"{len(entries)} records of a deleted topic")
                progress = True
            elif tp != own:
                progress = self._start_forward(source, tp, store, entries, records, now_ms)
                stopped = not progress
                if progress and self._replicated(source):
                    appended.add(own)  # parked follower fetches copy the intent at once
            elif (
                outcome := self._release_batch(source, tp, store, entries, records, now_ms)
            ) is None:
                stopped = True
            elif outcome:
                progress = True
                appended.add(tp)
                if tp == (source.topic, source.index):
                    placed.update(outcome)
        return progress and not stopped

    def _routes(
        self, source: Partition, taken: list[tuple[int, int]], found: Mapping[int, Record]
    ) -> dict[TopicPartition | None, tuple[list[tuple[int, int]], list[Record]]]:
        """Where each taken record goes, in due order: its own partition, or for a retry
        topic the target's or dead-letter topic's partition (moved as retry_topics says)."""
        own = (source.topic, source.index)
        meta = self.topics().get(source.topic)
        retry = self.settings(source.topic, meta.configs).retry if meta is not None else None
        routes: dict[TopicPartition | None, tuple[list[tuple[int, int]], list[Record]]] = {}
        for entry in taken:
            record = found.get(entry[1])
            if record is None:
                continue
            tp: TopicPartition | None = own
            if retry is not None:
                routed = route(record, retry, own, self._partition_count)
                tp, record = routed if routed is not None else (None, record)
            entries, records = routes.setdefault(tp, ([], []))
            entries.append(entry)
            records.append(record)
        return routes

    def _missing_topic(self, settings: DelaySettings) -> str | None:
        """A retry topic's records need their target (and dead-letter) topic."""
        retry = settings.retry
        wanted = (retry.target, retry.dead_letter) if retry is not None else ()
        for topic in filter(None, wanted):
            if self._partition_count(topic) is None:
                return f"the retry topic's target or dead-letter topic {topic} does not exist"
        return None

    def _partition_count(self, topic: str) -> int | None:
        meta = self.topics().get(topic)
        return meta.num_partitions if meta is not None else None

    def _release_batch(
        self,
        source: Partition,
        tp: TopicPartition,
        store: DelayStore,
        entries: list[tuple[int, int]],
        records: list[Record],
        now_ms: int,
    ) -> dict[int, int] | None:
        """Intent, then append to `tp` (then a cancellation if it failed), of as many of the
        records as one batch of `tp` holds; the others go back. Returns store offset ->
        offset in `tp` ({} when nothing was appended now), None to stop."""
        partition = self.partition_of(tp)
        if partition is None or not partition.is_leader:
            store.restore(entries)  # not led here now
            return {}
        count = _fitting(records, partition.log.config.max_message_bytes)
        store.restore(entries[count:])
        entries, records = entries[:count], records[:count]
        offsets = [offset for _, offset in entries]
        leader_epoch = source.leader_epoch  # the store's batches carry its partition's
        target_offset = partition.log_end_offset
        try:
            intent = store.write_intent(tp, target_offset, offsets, now_ms, leader_epoch)
        except StorageError as exc:
            log.warning("%s: cannot write a release intent: %s", store.log.dir, exc)
            store.restore(entries)
            return None
        # acks=1: the answer (if any) waited for the held record, not for its release.
        appended = partition.append_records_to_leader(encode_released(records), 1, 1, now_ms)
        if isinstance(appended, AppendResult):
            if partition is source:
                self._fence(tp, target_offset, intent + 1)  # followers get R with its intent
                store.keep_until_replicated(appended.last_offset + 1)
            store.confirm(offsets)
            self.released += len(offsets)
            for due, _ in entries:
                self.lateness.observe(now_ms - due)
            return {offset: appended.first_offset + i for i, offset in enumerate(offsets)}
        error = appended if isinstance(appended, ErrorCode) else appended.error_code
        if error in _UNRELEASABLE:  # the intent stays: these records are done with
            self._drop(store, entries, f"{len(entries)} due records {tp} refused: {appended}")
            return {offset: -1 for offset in offsets}
        store.restore(entries)
        self._cancel(store, intent, now_ms, leader_epoch)
        return None

    # -- forwarded releases (broker/release_forwarding.py) ------------------------------------

    def _start_forward(
        self,
        source: Partition,
        tp: TopicPartition,
        store: DelayStore,
        entries: list[tuple[int, int]],
        records: list[Record],
        now_ms: int,
    ) -> bool:
        """Write the intent of a forwarded release of as many of the records to `tp` as
        one batch holds (the others go back); whether it was written."""
        count = _fitting(records, self._max_message_bytes(tp[0]))
        store.restore(entries[count:])
        entries, records = entries[:count], records[:count]
        try:
            if store.producer_id < 0:
                store.producer_id = self._allocate_producer_id()
            producer = store.next_producer(tp)
            offsets = [offset for _, offset in entries]
            store.write_intent(tp, -1, offsets, now_ms, source.leader_epoch, producer)
        except (StorageError, RuntimeError) as exc:  # (no producer id block yet)
            log.warning("%s: cannot forward a release: %s", store.log.dir, exc)
            store.restore(entries)
            return False
        assert store.forwarding is not None
        batch = encode_released(records, producer)
        dues = [due for due, _ in entries]
        self.forwards[(source.topic, source.index)] = PendingForward(store.forwarding, batch, dues)
        return True

    def _allocate_producer_id(self) -> int:
        if self.allocate_producer_id is None:
            raise RuntimeError("no producer ids here")
        return self.allocate_producer_id()

    def _max_message_bytes(self, topic: str) -> int:
        meta = self.topics().get(topic)
        overrides = meta.configs if meta is not None else {}
        return int(effective_value(self.config(), overrides, "max.message.bytes")[0])

    def _forward(
        self, source: Partition, store: DelayStore, now_ms: int, appended: set[TopicPartition]
    ) -> bool:
        """Move the store's forwarded release on; whether it is done. It is appended only
        once its intent is replicated (the store's high watermark passed it: a new leader
        of the source resends it then, never appends its records again), with acks=all:
        here when its target is led here, else by the sender."""
        own = (source.topic, source.index)
        intent = store.forwarding
        assert intent is not None
        pending = self.forwards.get(own)
        if pending is None or pending.intent.offset != intent.offset:
            pending = self._resume(source, store, intent, now_ms)
            if pending is None:
                return store.forwarding is None
        if pending.sending:
            return False
        if intent.target[0] not in self.topics():
            return self._forwarded(source, store, pending, now_ms, "its topic was deleted")
        if self._replicated(source) and self.store_high_watermark(own) <= intent.offset:
            return False
        target = self.partition_of(intent.target)
        if target is None or not target.is_leader:
            pending.local_end = None  # (a local append not replicated yet: resent there)
            if self.wake_sender is None:  # a single node: led here again later
                return False
            pending.sending = True
            self.outbox.append((own, pending))
            self.wake_sender()
            return False
        if pending.local_end is None:
            appended_here = target.append_records_to_leader(
                pending.batch, -1, self.min_insync_replicas(intent.target), now_ms
            )
            if not isinstance(appended_here, AppendResult):
                error = (
                    appended_here
                    if isinstance(appended_here, ErrorCode)
                    else appended_here.error_code
                )
                return self.forward_answered(own, intent.offset, error, now_ms)
            pending.local_end = appended_here.last_offset + 1
            appended.add(intent.target)
        if target.high_watermark < pending.local_end:
            return False  # acks=all: the target's followers first
        return self._forwarded(source, store, pending, now_ms)

    def _resume(
        self, source: Partition, store: DelayStore, intent: Intent, now_ms: int
    ) -> PendingForward | None:
        """A forwarded release found unresolved when the store was opened: its batch again,
        with the producer and sequence it may have been appended with already."""
        meta = self.topics().get(source.topic)
        retry = self.settings(source.topic, meta.configs).retry if meta is not None else None
        own = (source.topic, source.index)
        records = []
        for record in store.read_held(sorted(intent.store_offsets)):
            routed = route(record, retry, own, self._partition_count) if retry else None
            records.append(routed[1] if routed is not None else record)
        pending = PendingForward(intent, b"", [])
        if not records:
            self._forwarded(source, store, pending, now_ms, "its records are not in the store")
            return None
        assert intent.producer is not None
        pending.batch = encode_released(records, intent.producer)
        self.forwards[own] = pending
        log.info(
            "%s: resending the release of %d records to %s (producer %d, sequence %d)",
            store.log.dir,
            len(records),
            intent.target,
            intent.producer.producer_id,
            intent.producer.base_sequence,
        )
        return pending

    def forward_answered(
        self, source_tp: TopicPartition, intent_offset: int, error: ErrorCode, now_ms: int
    ) -> bool:
        """The target's answer to a forwarded release (from the sender, or a local
        append's error); whether it is done."""
        self.outbox = [(tp, p) for tp, p in self.outbox if tp != source_tp]
        pending = self.forwards.get(source_tp)
        if pending is None or pending.intent.offset != intent_offset:
            return False
        pending.sending = False
        store, source = self.stores.get(source_tp), self.partition_of(source_tp)
        if store is None or source is None or not source.is_leader:
            return False
        if store.forwarding is None or store.forwarding.offset != intent_offset:
            return False
        outcome = answer_outcome(error)
        if outcome is None:
            if error in STUCK_ERRORS and not pending.warned:
                pending.warned = True
                log.warning(
                    "%s: the release to %s is refused with %s; sent again until accepted",
                    store.log.dir,
                    pending.intent.target,
                    error.name.upper(),
                )
            return False  # sent again in the next round
        return self._forwarded(source, store, pending, now_ms, outcome or None)

    def _forwarded(
        self,
        source: Partition,
        store: DelayStore,
        pending: PendingForward,
        now_ms: int,
        dropped: str | None = None,
    ) -> bool:
        """The forwarded release is done: appended, or its records `dropped` (why)."""
        try:
            store.write_forwarded(now_ms, source.leader_epoch)
        except StorageError as exc:  # a restart resends it: the target drops the duplicate
            log.error("%s: cannot end a forwarded release, releases stop: %s", store.log.dir, exc)
            store.failed = True
            return False
        self.forwards.pop((source.topic, source.index), None)
        offsets = list(pending.intent.store_offsets)
        store.confirm(offsets)
        if dropped is not None:
            log.warning("%s: dropping %d records: %s", store.log.dir, len(offsets), dropped)
            self.dropped += len(offsets)
            return True
        self.released += len(offsets)
        for due in pending.dues:
            self.lateness.observe(now_ms - due)
        return True

    def _fence(self, tp: TopicPartition, partition_offset: int, store_offset: int) -> None:
        leader = self.store_leader(tp, 0)
        if isinstance(leader, StoreLeader):
            leader.add_fence(partition_offset, store_offset)

    def _replicated(self, partition: Partition) -> bool:
        return len(partition.replicas) > 1

    def _drop(self, store: DelayStore, entries: list[tuple[int, int]], why: str) -> None:
        log.warning("%s: dropping %s", store.log.dir, why)
        store.confirm([offset for _, offset in entries])
        self.dropped += len(entries)

    def _cancel(self, store: DelayStore, intent: int, now_ms: int, leader_epoch: int) -> None:
        try:
            store.write_cancel(intent, now_ms, leader_epoch)
        except StorageError as exc:
            # Another intent after this one would pass it for done: stop until a restart.
            log.error("%s: cannot cancel a release, releases stop: %s", store.log.dir, exc)
            store.failed = True


def _fitting(records: list[Record], limit: int) -> int:
    """How many of the records, from the first, fit one batch of `limit` bytes
    (max.message.bytes, estimated from the records' sizes; at least one)."""
    size = HEADER_SIZE
    for index, record in enumerate(records):
        size += RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
        size += sum(len(name) + len(value or b"") + 10 for name, value in record.headers)
        if index and size > limit:
            return index
    return len(records)


def _answer(partition: Partition, held: AppendResult, placed: Mapping[int, int]) -> AppendResult:
    """The produce answer of a held batch: its offsets when all its records were released
    at once in one run, else -1 (offsets are given at release)."""
    count = held.last_offset - held.first_offset + 1
    offsets = [placed.get(held.first_offset + i) for i in range(count)]
    first = offsets[0]
    if first is None or offsets != list(range(first, first + count)):
        return AppendResult(-1, -1, -1, partition.log_start_offset)
    return AppendResult(first, first + count - 1, -1, partition.log_start_offset)
