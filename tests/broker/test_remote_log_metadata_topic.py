"""The records of `__remote_log_metadata` (broker/remote_log_metadata_topic.py): Kafka's
partitioner, and replaying the records into the same list on every broker."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkalite.broker.remote_log_metadata_topic import decode, encode, metadata_partition
from kafkalite.storage.remote.metadata import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    RemoteLogSegmentMetadata,
    RemoteLogSegments,
    event,
    log_start_record,
)


@pytest.mark.parametrize(
    ("topic_id", "partition", "expected"),
    [  # computed with Kafka's RemoteLogMetadataTopicPartitioner (Java), 50 partitions
        ("00000000-0000-0001-0000-000000000002", 0, 30),
        ("00000000-0000-0001-0000-000000000002", 7, 23),
        ("f3a1c2d4-8b7e-4f60-9a2b-c3d4e5f60718", 0, 5),
        ("f3a1c2d4-8b7e-4f60-9a2b-c3d4e5f60718", 7, 41),
        ("ffffffff-ffff-ffff-8000-000000000000", 0, 2),
        ("ffffffff-ffff-ffff-8000-000000000000", 7, 22),
    ],
)
def test_metadata_partition_is_kafkas(topic_id: str, partition: int, expected: int) -> None:
    assert metadata_partition((uuid.UUID(topic_id), partition), 50) == expected


def test_records_replay_into_the_same_list_on_every_broker() -> None:
    user = (uuid.uuid4(), 3)
    segment = RemoteLogSegmentMetadata(
        segment_id=uuid.uuid4(),
        start_offset=0,
        end_offset=14,
        max_timestamp_ms=1,
        broker_id=1,
        event_timestamp_ms=2,
        segment_size_in_bytes=100,
        segment_leader_epochs=((0, 0),),
        suffixes=(".log",),
    )
    written = [
        event(segment, COPY_SEGMENT_STARTED),
        event(segment, COPY_SEGMENT_FINISHED),
        log_start_record(5),
    ]
    values = [encode(user, record)[1] for record in written]
    decoded = [decode(value) for value in values]
    assert all(d is not None and d[0] == user for d in decoded)
    leader, follower = RemoteLogSegments(Path("x")), RemoteLogSegments(Path("y"))
    leader.apply(written)
    leader.apply(written[1:])  # the leader applies its own writes once more as it consumes them
    follower.apply([d[1] for d in decoded if d is not None])
    for replica in (leader, follower):
        assert replica.copied_end == 14 and replica.log_start_offset == 5
        assert [m.segment_id for m in replica.copied] == [segment.segment_id]
    assert decode(b"not json") is None
