"""A share-partition: one share group's view of one topic partition (KIP-932; Kafka's
core/src/main/java/kafka/server/share/SharePartition.java), sans-IO.

Records between the share-partition start offset (SPSO) and end offset (SPEO, exclusive
here) are in flight, each in a state:

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                     |  |----REJECT / GAP--> ARCHIVED
        |---RELEASE / lock expiry / member gone (ARCHIVED once the delivery count
                                                 reached group.share.delivery.count.limit)

Acquiring a record counts a delivery and locks it for the member for
`group.share.record.lock.duration.ms`. The SPSO moves past records once they are
ACKNOWLEDGED or ARCHIVED; new records are acquired only while fewer than
`group.share.partition.max.record.locks` are in flight (at batch boundaries: whole batches
are acquired, as Kafka's batch-optimized mode). Offsets the log does not hold (compacted
away, control batches, aborted transactions under read_committed) are archived without a
delivery. The caller reads the log; this module only decides, and reports what it changed
(`version`) so the caller persists the state (`state_batches`) before it answers.

Dead-letter topics (KIP-1191): when the group has one (`config.dead_letter`), a record
REJECTed or at the delivery count limit goes to ARCHIVING, as in Kafka 4.4: persisted so,
not delivered again and not passed by the SPSO, until the caller wrote it to the dead-letter
topic (`take_dead_letters`, then `dead_lettered`: ARCHIVED). Loaded in ARCHIVING (a broker
that stopped in between), it is a dead letter to write again, its cause told by its count.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState, with the ids ShareSnapshot's DeliveryState stores."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # KIP-1191: on its way to the dead-letter topic
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes (RENEW: KIP-1222, v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
# The acknowledgements Kafka's RecordAcknowledgementsPerSec counts (not gaps).
ACK_TYPES_COUNTED = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
)


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_in_flight_records: int = 2000  # group.share.partition.max.record.locks
    dead_letter: bool = False  # the group has a dead-letter topic (KIP-1191)


# The causes Kafka's ShareGroupDLQManager names in the `__dlq.errors.message` header.
CLIENT_REJECT = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


@dataclass(slots=True)
class DeadLetter:
    """A record to write to the group's dead-letter topic, and why."""

    offset: int
    delivery_count: int
    cause: str
    persisted: bool = False  # its ARCHIVING state is committed: it may be written
    writing: bool = False  # taken by a writer (not taken twice)


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = -1


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A batch the caller read from the log: its offsets, and whether its records are never
    delivered (a control batch, or a batch of an aborted transaction under read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetch's AcquiredRecords: a run of offsets with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """ShareFetch/ShareAcknowledge's AcknowledgementBatch: one type for the whole range,
    or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """What is persisted (ShareSnapshot's StateBatches): ACQUIRED is stored as AVAILABLE,
    since a lock does not survive its broker."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass
class ShareRecordCounts:
    """Running totals of what happened to this partition's records, for the metrics (Kafka's
    RecordAcknowledgementsPerSec by ackType, AcquisitionLockTimeoutPerSec) and kafkalite's
    own acquired and archived counts."""

    acquired: int = 0
    acknowledgements: dict[AcknowledgeType, int] = field(
        default_factory=lambda: dict.fromkeys(ACK_TYPES_COUNTED, 0)
    )
    archived: int = 0
    lock_timeouts: int = 0


@dataclass(eq=False)
class SharePartition:
    config: SharePartitionConfig
    start_offset: int
    end_offset: int = -1  # exclusive; -1: the start offset
    records: dict[int, InFlightRecord] = field(default_factory=dict)
    # Bumped by every change that must be persisted (not by acquisition or renewal).
    version: int = 0
    # Offsets whose persisted state changed since `take_changes` (a ShareUpdate's batches).
    changed: set[int] = field(default_factory=set)
    # No record below it is available (next_fetch_offset resumes its scan there).
    _available_from: int = 0
    counts: ShareRecordCounts = field(default_factory=ShareRecordCounts)
    # Archived records not yet in the dead-letter topic, by offset.
    dead_letters: dict[int, DeadLetter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    @classmethod
    def from_state(
        cls, config: SharePartitionConfig, start_offset: int, batches: Iterable[StateBatch]
    ) -> SharePartition:
        """Rebuild from persisted state: what was acquired is available again; what was
        ARCHIVING is a dead letter to write (at the limit, for it; else rejected, as Kafka's
        maybeResumeDlqArchiving tells)."""
        partition = cls(config, start_offset)
        for batch in batches:
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                state = RecordState(batch.delivery_state)
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                elif state is RecordState.ARCHIVING:
                    exceeded = batch.delivery_count >= config.delivery_count_limit
                    cause = DELIVERY_COUNT_EXCEEDED if exceeded else CLIENT_REJECT
                    partition.dead_letters[offset] = DeadLetter(
                        offset, batch.delivery_count, cause, persisted=True
                    )
                partition.records[offset] = InFlightRecord(state, batch.delivery_count)
                partition.end_offset = max(partition.end_offset, offset + 1)
        for offset in range(start_offset, partition.end_offset):
            partition.records.setdefault(offset, InFlightRecord())
        partition._advance_start()
        return partition

    # -- what to fetch ---------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The lowest offset that may be acquired: an available in-flight record, else the
        end offset."""
        offset = max(self._available_from, self.start_offset)
        while offset < self.end_offset and self.records[offset].state is not RecordState.AVAILABLE:
            offset += 1
        self._available_from = offset
        return offset

    def can_acquire(self, readable_end: int) -> bool:
        """Whether a fetch could acquire something, the log being readable to
        `readable_end` (the high watermark, or the last stable offset)."""
        if self.next_fetch_offset() < self.end_offset:
            return True
        return self.in_flight() < self.config.max_in_flight_records and (
            readable_end > self.end_offset
        )

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def idle(self) -> bool:
        """Nothing acquired, nothing waiting for the dead-letter topic."""
        return not self.dead_letters and all(
            r.state is not RecordState.ACQUIRED for r in self.records.values()
        )

    # -- acquisition -----------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        fetched: Sequence[FetchedBatch],
        max_records: int,
        now_ms: int,
        record_limit: bool = False,
    ) -> list[AcquiredRecords]:
        """Acquire for `member_id`, from the batches read at `next_fetch_offset()`, whole
        batches until at least `max_records` are acquired (ShareFetch's batch-optimized
        mode), or exactly up to `max_records` (its record-limit mode, v2)."""
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        for batch in fetched:
            if len(taken) >= max_records:
                break
            if batch.last_offset < self.start_offset:
                continue
            if batch.base_offset >= self.end_offset and not self._room_for_new():
                break
            self._archive_gap(batch.base_offset)
            for offset in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
                if record_limit and len(taken) >= max_records:
                    break
                record = self.records.get(offset)
                if record is None:  # new: past the end offset
                    record = self.records[offset] = InFlightRecord()
                    self.end_offset = offset + 1
                    if batch.skip:
                        self._archive(offset, record)
                        continue
                elif record.state is not RecordState.AVAILABLE:
                    continue
                elif batch.skip:
                    self._archive(offset, record)
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline_ms = now_ms + self.config.lock_duration_ms
                taken.append((offset, record.delivery_count))
        self.counts.acquired += len(taken)
        self._advance_start()
        return _runs(taken)

    def _room_for_new(self) -> bool:
        return self.in_flight() < self.config.max_in_flight_records

    def _archive_gap(self, base_offset: int) -> None:
        """Offsets between the end offset and the next batch are not in the log (compacted
        away): archived, never delivered."""
        for offset in range(self.end_offset, base_offset):
            self._archive(offset, self.records.setdefault(offset, InFlightRecord()))
        self.end_offset = max(self.end_offset, base_offset)

    # -- acknowledgement -------------------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int
    ) -> ErrorCode:
        """Apply a member's acknowledgements, all or none: INVALID_REQUEST for a malformed
        batch, INVALID_RECORD_STATE when an offset is not acquired by this member."""
        steps: list[tuple[int, InFlightRecord, AcknowledgeType]] = []
        for batch in batches:
            count = batch.last_offset - batch.first_offset + 1
            types = batch.acknowledge_types
            if count <= 0 or len(types) not in (1, count):
                return ErrorCode.invalid_request
            try:
                kinds = [AcknowledgeType(t) for t in types]
            except ValueError:
                return ErrorCode.invalid_request
            for index, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                record = self.records.get(offset) if offset >= self.start_offset else None
                if (
                    record is None
                    or record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id
                ):
                    return ErrorCode.invalid_record_state
                steps.append((offset, record, kinds[index] if len(kinds) > 1 else kinds[0]))
        for offset, record, kind in steps:
            self._apply(offset, record, kind, now_ms)
            if kind in self.counts.acknowledgements:
                self.counts.acknowledgements[kind] += 1
        self._advance_start()
        return ErrorCode.none

    def _apply(
        self, offset: int, record: InFlightRecord, kind: AcknowledgeType, now_ms: int
    ) -> None:
        if kind is AcknowledgeType.RENEW:
            record.lock_deadline_ms = now_ms + self.config.lock_duration_ms
            return
        if kind is AcknowledgeType.ACCEPT:
            self._settle(offset, record, RecordState.ACKNOWLEDGED)
        elif kind is AcknowledgeType.RELEASE:
            self._release(offset, record)
        elif kind is AcknowledgeType.REJECT:
            self._archive(offset, record, CLIENT_REJECT)
        else:  # GAP
            self._archive(offset, record)

    # -- releases --------------------------------------------------------------------------

    def release_member(self, member_id: str) -> int:
        """The member left (its share session closed, or it left the group): its records
        are available again. Returns how many were released."""
        released = 0
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._release(offset, record)
                released += 1
        self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release the records whose acquisition lock expired; returns how many."""
        expired = 0
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(offset, record)
                expired += 1
        self.counts.lock_timeouts += expired
        self._advance_start()
        return expired

    def next_lock_deadline(self) -> int | None:
        deadlines = [
            r.lock_deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED
        ]
        return min(deadlines, default=None)

    def move_start(self, log_start_offset: int) -> None:
        """The log's start moved past records in flight (retention, DeleteRecords): they
        are gone, as Kafka archives them."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            self.records.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.version += 1
        self._advance_start()

    def _release(self, offset: int, record: InFlightRecord) -> None:
        if record.delivery_count >= self.config.delivery_count_limit:
            self._archive(offset, record, DELIVERY_COUNT_EXCEEDED)
        else:
            self._settle(offset, record, RecordState.AVAILABLE)

    def _archive(self, offset: int, record: InFlightRecord, cause: str | None = None) -> None:
        """Archive; with a `cause` and a dead-letter topic, ARCHIVING first."""
        if cause is None or not self.config.dead_letter:
            self._settle(offset, record, RecordState.ARCHIVED)
            return
        self.counts.archived += 1
        self._settle(offset, record, RecordState.ARCHIVING)
        self.dead_letters[offset] = DeadLetter(offset, record.delivery_count, cause)

    # -- dead letters ----------------------------------------------------------------------

    def archiving_persisted(self, batches: Iterable[StateBatch]) -> None:
        """These state batches are committed: their ARCHIVING records may be written."""
        for batch in batches:
            if batch.delivery_state == RecordState.ARCHIVING:
                for offset in range(batch.first_offset, batch.last_offset + 1):
                    if (dead_letter := self.dead_letters.get(offset)) is not None:
                        dead_letter.persisted = True

    def take_dead_letters(self) -> list[DeadLetter]:
        """The dead letters persisted ARCHIVING that no writer has taken yet, in offset
        order."""
        taken = [d for _, d in sorted(self.dead_letters.items()) if _ready(d)]
        for dead_letter in taken:
            dead_letter.writing = True
        return taken

    def pending_dead_letters(self) -> bool:
        """Whether some dead letter waits for a writer."""
        return any(_ready(d) for d in self.dead_letters.values())

    def dead_lettered(self, offsets: Iterable[int]) -> None:
        """Their dead-letter records are committed (or never will be): ARCHIVED."""
        for offset in offsets:
            record = self.records.get(offset)
            if self.dead_letters.pop(offset, None) is not None and record is not None:
                record.state = RecordState.ARCHIVED
                self.version += 1
                self.changed.add(offset)
        self._advance_start()

    def _settle(self, offset: int, record: InFlightRecord, state: RecordState) -> None:
        if state is RecordState.AVAILABLE:
            self._available_from = min(self._available_from, offset)
        elif state is RecordState.ARCHIVED:
            self.counts.archived += 1
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = -1
        self.version += 1
        self.changed.add(offset)

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset:
            record = self.records[self.start_offset]
            if record.state not in _TERMINAL:
                break
            del self.records[self.start_offset]
            self.start_offset += 1

    # -- persistence -----------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as runs of one (state, delivery count)."""
        return self._state_batches(range(self.start_offset, self.end_offset))

    def take_changes(self) -> list[StateBatch]:
        """The changed records still in flight, as state batches (Kafka's partition leader
        sends the share coordinator the batches it changed)."""
        changed, self.changed = sorted(o for o in self.changed if o >= self.start_offset), set()
        return self._state_batches(changed)

    def _state_batches(self, offsets: Iterable[int]) -> list[StateBatch]:
        """`offsets` (ascending) as runs of one (state, delivery count); an acquired record
        is saved as available (a lock is not state: after a restart it is delivered again)."""
        batches: list[StateBatch] = []
        for offset in offsets:
            record = self.records[offset]
            state = record.state
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and (last.delivery_state, last.delivery_count) == (state, record.delivery_count)
            ):
                batches[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, state, record.delivery_count))
        return batches

    def acquired_by(self, member_id: str) -> list[int]:
        """The offsets `member_id` holds (tests, describing)."""
        return sorted(
            offset
            for offset, r in self.records.items()
            if r.state is RecordState.ACQUIRED and r.member_id == member_id
        )


def _ready(dead_letter: DeadLetter) -> bool:
    return dead_letter.persisted and not dead_letter.writing


def _runs(taken: list[tuple[int, int]]) -> list[AcquiredRecords]:
    """Consecutive offsets with one delivery count, as AcquiredRecords."""
    runs: list[AcquiredRecords] = []
    for offset, count in taken:
        last = runs[-1] if runs else None
        if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
            runs[-1] = AcquiredRecords(last.first_offset, offset, count)
        else:
            runs.append(AcquiredRecords(offset, offset, count))
    return runs
