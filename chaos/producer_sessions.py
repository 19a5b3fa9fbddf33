"""Which producer session (producer id, producer epoch) wrote each record of a run's topic, read
from the batch headers in the brokers' segment files that the run directory keeps (kafkalite's
and Kafka's logs share the layout `<log dir>/<topic>-<partition>/<base offset>.log`).

The checker needs it to tell a broker's duplicate from a client's resend. A broker deduplicates
within one producer id and epoch only; librdkafka (2.16) bumps the epoch of the whole producer
when a request behind a failed one is answered OUT_OF_ORDER_SEQUENCE_NUMBER and sends every
unacknowledged message again from sequence 0, also those possibly already written (librdkafka
issue #4953). Kafka must append those too (`ProducerAppendInfo.checkSequence`: a new epoch
starts at sequence 0). A copy written by a later session of the same producer is that resend.
"""

from __future__ import annotations

from pathlib import Path

from kafkalite.storage.batch import iter_batches

Session = tuple[int, int]  # (producer id, producer epoch)


def producer_sessions(run_dir: Path, topic: str) -> dict[tuple[int, int], Session | None]:
    """(partition, offset) -> the session of the batch holding it, from every replica's segments
    (and a tiered run's uploaded ones). Replicas agree below the high watermark; an offset they
    disagree on maps to None."""
    sessions: dict[tuple[int, int], Session | None] = {}
    for partition, segment in _segments(Path(run_dir), topic):
        for _, header in iter_batches(segment.read_bytes()):
            session = (header.producer_id, header.producer_epoch)
            for offset in range(header.base_offset, header.next_offset):
                known = sessions.setdefault((partition, offset), session)
                if known != session:
                    sessions[(partition, offset)] = None
    return sessions


def _segments(run_dir: Path, topic: str) -> list[tuple[int, Path]]:
    """Every `.log` segment of `topic` under the run directory: the brokers' log dirs, and the
    `.log` objects a tiered run's S3 server keeps as files (`s3/buckets/<bucket>/<topic>-<topic
    id>/<partition>/<base offset>-<segment id>.log`, the local copies being deleted)."""
    found = []
    for log_dir in sorted(run_dir.rglob(f"{topic}-*")):
        partition = _partition_of(log_dir, topic)
        if partition is not None:
            found += [(partition, segment) for segment in sorted(log_dir.glob("*.log"))]
    for topic_dir in sorted((run_dir / "s3" / "buckets").glob(f"*/{topic}-*")):
        if len(topic_dir.name) == len(topic) + 23:  # "-" and the 22-character topic id
            found += [(int(p.parent.name), p) for p in sorted(topic_dir.glob("*/*.log"))]
    return found


def _partition_of(log_dir: Path, topic: str) -> int | None:
    suffix = log_dir.name.removeprefix(f"{topic}-")
    return int(suffix) if log_dir.is_dir() and suffix.isdigit() else None
