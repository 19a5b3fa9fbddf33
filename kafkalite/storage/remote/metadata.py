"""RemoteLogSegmentMetadata (Kafka's) and one partition's durable list of remote segments.

The list is a file in the partition's directory, `remote-log-segment-metadata`: one JSON
record per line, appended and fsynced, replayed on open (a torn last line is ignored). Its
records are the state changes of Kafka's RemoteLogSegmentState:

    COPY_SEGMENT_STARTED   written (durably) before the first object is uploaded
    COPY_SEGMENT_FINISHED  after every object of the segment is uploaded: only now served
    DELETE_SEGMENT_STARTED before its objects are deleted: no longer served
    DELETE_SEGMENT_FINISHED after they are gone

A segment left in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED by a crash is never served;
its objects are deleted (`orphans`) and the local segment, never deleted before it was
uploaded, is copied again under a new segment id. Why a file on a single node and not
Kafka's `__remote_log_metadata` topic: it is as durable there, lives and dies with the
partition's log, and needs no consumer to rebuild it on start. In a cluster the list is
replicated through the topic instead (broker/remote_log_metadata_manager.py): the same
records, the same replay, with a `sink` that publishes them in place of the file.

In a cluster each record also carries its writer's leader epoch (`leader_epoch`; Kafka's
RemoteLogSegmentMetadata names the segment's epochs and broker, and the leader's RLM task is
fenced by the new leader's epoch), and a new leader's first record is LEADER_EPOCH alone.
The replay ignores a record of an epoch older than the highest it has replayed (a deposed
but still running leader's late COPY_SEGMENT_FINISHED or DELETE_SEGMENT_*), logging it once
per epoch: it depends only on the records before it, so every broker fences the same ones.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkalite.storage.durable_files import fsync_dir, write_atomically

log = logging.getLogger("kafkalite.remote")

METADATA_FILE = "remote-log-segment-metadata"
COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"
COPIED_UP_TO = "COPIED_UP_TO"  # written when the file is compacted: the highest copied end
# DeleteRecords or remote retention moved the log start (Kafka's log-start-offset checkpoint
# for the remote tier): nothing below it is served, remote segments wholly below are deleted.
LOG_START_OFFSET = "LOG_START_OFFSET"
# A cluster: a new leader's first record once it has read its list to the end, so its epoch
# supersedes the old leader's at once (records of older epochs are fenced from then on).
LEADER_EPOCH = "LEADER_EPOCH"
EPOCH_FIELD = "leader_epoch"  # the writing leader's epoch, on every record in a cluster
COMPACT_AFTER_DEAD_RECORDS = 1000


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """Kafka's RemoteLogSegmentMetadata (the topic-partition is the file's)."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int  # inclusive, as Kafka's
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]  # (epoch, start offset), ascending
    suffixes: tuple[str, ...]  # the objects uploaded (storage/remote/keys.py)
    state: str = COPY_SEGMENT_STARTED

    def to_record(self) -> dict[str, object]:
        # By hand, not dataclasses.asdict: its deep copies were 2 s of a start with 10,000
        # remote segments (compacting the file).
        return {
            "segment_id": str(self.segment_id),
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "max_timestamp_ms": self.max_timestamp_ms,
            "broker_id": self.broker_id,
            "event_timestamp_ms": self.event_timestamp_ms,
            "segment_size_in_bytes": self.segment_size_in_bytes,
            "segment_leader_epochs": [list(entry) for entry in self.segment_leader_epochs],
            "suffixes": list(self.suffixes),
            "event": self.state,
        }

    @classmethod
    def from_record(cls, record: dict[str, object]) -> RemoteLogSegmentMetadata:
        fields = dict(record)
        fields["state"] = fields.pop("event")
        fields.pop(EPOCH_FIELD, None)  # the record's, not the segment's
        fields["segment_id"] = uuid.UUID(str(fields["segment_id"]))
        epochs = fields["segment_leader_epochs"]
        fields["segment_leader_epochs"] = tuple(tuple(e) for e in epochs)  # type: ignore[attr-defined]
        fields["suffixes"] = tuple(fields["suffixes"])  # type: ignore[arg-type]
        return cls(**fields)  # type: ignore[arg-type]

    def epoch_for_offset(self, offset: int) -> int:
        epoch = -1
        for entry_epoch, start in self.segment_leader_epochs:
            if start > offset:
                break
            epoch = entry_epoch
        return epoch


@dataclass(eq=False)
class RemoteLogSegments:
    """A partition's remote segments by id, as replayed from its metadata file.

    Changes are made on the event loop in memory and made durable with `append` (blocking:
    from a worker thread) before they take effect for readers where that matters."""

    path: Path
    segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = field(default_factory=dict)
    copied_end: int = -1  # highest end offset ever copied (also of deleted segments)
    log_start_floor: int = 0  # the log start DeleteRecords or retention moved it to
    dead_records: int = 0
    leader_epoch: int = -1  # the highest writer's epoch replayed (a cluster's records)
    fenced_epochs: set[int] = field(default_factory=set)  # stale writers logged (once each)
    # Replicated (a cluster): `append` hands the records to the metadata topic's publisher
    # instead of the file; they take effect as they are consumed back.
    sink: Callable[[list[dict[str, object]]], None] | None = None

    @classmethod
    def load(cls, dir: Path) -> RemoteLogSegments:
        self = cls(Path(dir) / METADATA_FILE)
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return self
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError:
                log.warning("%s:%d: ignoring a torn record", self.path, number)
                continue
            self._apply(record)
        # The lines a compacted file would not hold (exact: a file just compacted is not
        # compacted again at each start, as it was when every copied segment's FINISHED
        # line counted as dead).
        self.dead_records = max(0, len(lines) - self._snapshot_line_count())
        if self.dead_records > COMPACT_AFTER_DEAD_RECORDS:
            self._compact()
        return self

    def _apply(self, record: dict[str, object]) -> None:
        event = record["event"]
        if EPOCH_FIELD in record:
            epoch = int(record[EPOCH_FIELD])  # type: ignore[call-overload]
            if epoch < self.leader_epoch:
                self._fenced(epoch, event)
                return
            self.leader_epoch = epoch
        if event == LEADER_EPOCH:
            return
        if event == COPIED_UP_TO:
            self.copied_end = max(self.copied_end, int(record["end"]))  # type: ignore[call-overload]
            return
        if event == LOG_START_OFFSET:
            self.dead_records += 1
            floor = int(record["offset"])  # type: ignore[call-overload]
            self.log_start_floor = max(self.log_start_floor, floor)
            return
        segment_id = uuid.UUID(str(record["segment_id"]))
        if event == COPY_SEGMENT_STARTED:
            self.segments[segment_id] = RemoteLogSegmentMetadata.from_record(record)
            return
        current = self.segments.get(segment_id)
        if current is None:
            return
        self.dead_records += 1
        if event == DELETE_SEGMENT_FINISHED:
            self.dead_records += 1
            del self.segments[segment_id]
            return
        self.segments[segment_id] = replace(current, state=str(event))
        if event == COPY_SEGMENT_FINISHED:
            self.copied_end = max(self.copied_end, current.end_offset)

    def _fenced(self, epoch: int, event: object) -> None:
        """A deposed leader's late write: ignored. Only the records replayed before it
        decide, so every broker replaying the same records fences the same ones."""
        if epoch not in self.fenced_epochs:
            self.fenced_epochs.add(epoch)
            log.info(
                "%s: ignoring %s and any later record of leader epoch %d: fenced by epoch %d",
                self.path,
                event,
                epoch,
                self.leader_epoch,
            )

    def _compact(self) -> None:
        self.write_snapshot(self.path)
        self.dead_records = 0

    def _snapshot_line_count(self) -> int:
        """The lines `write_snapshot` writes."""
        started = sum(1 for m in self.segments.values() if m.state == COPY_SEGMENT_STARTED)
        return 2 + 2 * len(self.segments) - started

    def write_snapshot(self, path: Path) -> None:
        """The list as a compacted file at `path` (blocking)."""
        lines = [
            json.dumps({"event": COPIED_UP_TO, "end": self.copied_end}),
            json.dumps(log_start_record(self.log_start_floor)),
        ]
        for metadata in self.segments.values():
            lines.append(json.dumps(replace(metadata, state=COPY_SEGMENT_STARTED).to_record()))
            if metadata.state != COPY_SEGMENT_STARTED:
                lines.append(json.dumps(_event(metadata.segment_id, metadata.state)))
        write_atomically(path, "\n".join(lines) + "\n")

    # -- durable changes (blocking: worker threads) ---------------------------------------

    def append(self, records: list[dict[str, object]]) -> None:
        """Append records and fsync; the first append also makes the file's entry durable.
        Replicated: hand them to the sink (the caller applies them in memory meanwhile)."""
        if self.sink is not None:
            self.sink(records)
            return
        new = not self.path.exists()
        data = "".join(json.dumps(record) + "\n" for record in records).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            fsync_dir(self.path.parent)

    # -- in-memory changes (the event loop) -----------------------------------------------

    def apply(self, records: list[dict[str, object]]) -> None:
        for record in records:
            self._apply(record)

    # -- queries -------------------------------------------------------------------------

    @property
    def copied(self) -> list[RemoteLogSegmentMetadata]:
        """The segments that are served: COPY_SEGMENT_FINISHED and not wholly below the log
        start, by start offset."""
        done = [
            m
            for m in self.segments.values()
            if m.state == COPY_SEGMENT_FINISHED and m.end_offset >= self.log_start_floor
        ]
        return sorted(done, key=lambda metadata: metadata.start_offset)

    @property
    def below_log_start(self) -> list[RemoteLogSegmentMetadata]:
        """Copied segments wholly below the log start: to delete."""
        return [
            m
            for m in self.segments.values()
            if m.state == COPY_SEGMENT_FINISHED and m.end_offset < self.log_start_floor
        ]

    @property
    def orphans(self) -> list[RemoteLogSegmentMetadata]:
        """Segments whose objects are to be deleted: a copy or a deletion interrupted."""
        return [m for m in self.segments.values() if m.state != COPY_SEGMENT_FINISHED]

    @property
    def log_start_offset(self) -> int | None:
        copied = self.copied
        return max(copied[0].start_offset, self.log_start_floor) if copied else None

    @property
    def size_in_bytes(self) -> int:
        return sum(metadata.segment_size_in_bytes for metadata in self.copied)

    def segment_for(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The served segment holding `offset`, or the first one after it (a gap left by
        batches compacted away never happens: remote topics are not compacted)."""
        for metadata in self.copied:
            if offset <= metadata.end_offset:
                return metadata
        return None


def stamped(records: list[dict[str, object]], epoch: int) -> list[dict[str, object]]:
    """The records as written by the leader of `epoch` (Kafka's leader-epoch fencing)."""
    return [{**record, EPOCH_FIELD: epoch} for record in records]


def leader_epoch_record(epoch: int) -> dict[str, object]:
    return {"event": LEADER_EPOCH, EPOCH_FIELD: epoch}


def log_start_record(offset: int) -> dict[str, object]:
    return {"event": LOG_START_OFFSET, "offset": offset}


def event(metadata: RemoteLogSegmentMetadata, state: str) -> dict[str, object]:
    """The record of a state change of `metadata` (COPY_SEGMENT_STARTED: the whole of it)."""
    if state == COPY_SEGMENT_STARTED:
        return replace(metadata, state=state).to_record()
    return _event(metadata.segment_id, state)


def _event(segment_id: uuid.UUID, state: str) -> dict[str, object]:
    return {"event": state, "segment_id": str(segment_id)}
