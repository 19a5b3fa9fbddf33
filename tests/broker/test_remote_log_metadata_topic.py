"""The records of `__remote_log_metadata` (broker/remote_log_metadata_topic.py): Kafka's
partitioner, replaying the records into the same list on every broker, and the manager's
consuming side (broker/remote_log_metadata_manager.py) without the network."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from partition_fixtures import open_partition, state

from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from kafkalite.broker.remote_log_metadata_topic import (
    METADATA_TOPIC,
    decode,
    encode,
    metadata_partition,
)
from kafkalite.config import BrokerConfig
from kafkalite.storage.log import LogConfig
from kafkalite.storage.records import encode_batch
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


def _segment(start: int, end: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        segment_id=uuid.uuid4(),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=1,
        broker_id=2,
        event_timestamp_ms=2,
        segment_size_in_bytes=100,
        segment_leader_epochs=((0, start),),
        suffixes=(".log",),
    )


def test_a_new_leader_acts_only_once_it_has_read_its_metadata_partition_to_the_end(
    tmp_path: Path,
) -> None:
    """The manager gives the hosted tiered partition the replicated list, replays fetched
    records once each (an overlapping fetch changes nothing), and lets the leader act only
    after two fetches found the metadata partition read to its high watermark."""
    partition = open_partition(tmp_path, LogConfig(remote_storage_enable=True))
    partition.make_leader(state(), 0)
    topics = {METADATA_TOPIC: TopicMetadata(METADATA_TOPIC, uuid.uuid4(), 3)}
    replicas = SimpleNamespace(
        metadata=SimpleNamespace(topics=topics),
        topics={"t": SimpleNamespace(partitions={0: partition})},
    )
    manager = TopicBasedRemoteLogMetadataManager(
        BrokerConfig({"broker.id": "1"}),
        replicas,  # type: ignore[arg-type]
        lambda _broker: None,
        lambda: 1_000,
    )
    manager.attach()
    user = (partition.topic_id, 0)
    assert partition.log.remote is manager.states[user]
    index = metadata_partition(user, 3)
    assert manager.positions == {index: 0}
    assert not manager.ready(partition)

    segment = _segment(0, 14)
    written = [event(segment, COPY_SEGMENT_STARTED), event(segment, COPY_SEGMENT_FINISHED)]
    records = encode_batch([encode(user, record) for record in written], timestamp=1)

    def fetched(records: bytes) -> SimpleNamespace:
        return SimpleNamespace(
            partition_index=index, error_code=0, records=records, high_watermark=2
        )

    manager._consume(fetched(records))
    assert manager.positions[index] == 2 and not manager.ready(partition)
    manager._consume(fetched(records))  # the same batch again: replayed once only
    assert manager.ready(partition)
    assert partition.log.remote.copied_end == 14
    assert [m.segment_id for m in partition.log.remote.copied] == [segment.segment_id]
