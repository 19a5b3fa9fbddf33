"""The records of `__remote_log_metadata` (broker/remote_log_metadata_topic.py): Kafka's
partitioner, replaying the records into the same list on every broker, and the manager's
consuming side (broker/remote_log_metadata_manager.py) without the network."""

from __future__ import annotations

import logging
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
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    RemoteLogSegmentMetadata,
    RemoteLogSegments,
    event,
    leader_epoch_record,
    log_start_record,
    stamped,
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


def _replayed(records: list[dict[str, object]]) -> list[RemoteLogSegments]:
    """The records replayed on two brokers, through the topic's encoding."""
    user = (uuid.uuid4(), 0)
    values = [decode(encode(user, record)[1]) for record in records]
    replicas = [RemoteLogSegments(Path("a")), RemoteLogSegments(Path("b"))]
    replicas[0].apply(records)
    replicas[1].apply([value[1] for value in values if value is not None])
    return replicas


def _served(replica: RemoteLogSegments) -> list[uuid.UUID]:
    return [m.segment_id for m in replica.copied]


def test_a_deposed_leaders_late_records_are_fenced_on_every_broker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leader of epoch 1 is deposed mid-copy of `late` and, still running, writes its
    FINISHED and a deletion of `kept` after the leader of epoch 2 took over: both are ignored
    on every broker (logged once), and the new leader's own records apply."""
    kept, late, new = _segment(0, 9), _segment(10, 19), _segment(10, 24)
    old_leader = stamped(
        [
            event(kept, COPY_SEGMENT_STARTED),
            event(kept, COPY_SEGMENT_FINISHED),
            event(late, COPY_SEGMENT_STARTED),
        ],
        1,
    )
    stale = stamped([event(late, COPY_SEGMENT_FINISHED), event(kept, DELETE_SEGMENT_STARTED)], 1)
    new_leader = stamped(
        [
            event(late, DELETE_SEGMENT_STARTED),  # the orphan, deleted by the new leader
            event(late, DELETE_SEGMENT_FINISHED),
            event(new, COPY_SEGMENT_STARTED),
            event(new, COPY_SEGMENT_FINISHED),
        ],
        2,
    )
    caplog.set_level(logging.INFO, logger="kafkalite.remote")
    records = [*old_leader, leader_epoch_record(2), *stale, *new_leader]
    for replica in _replayed(records):
        assert _served(replica) == [kept.segment_id, new.segment_id]
        assert replica.copied_end == 24 and replica.leader_epoch == 2
    fenced = [r for r in caplog.records if "fenced" in r.getMessage()]
    assert len(fenced) == 2  # once per broker, not once per record
    assert all(r.levelno == logging.INFO for r in fenced)


def test_a_stale_finished_after_the_new_leaders_first_record_is_not_served() -> None:
    """Without the marker: the new leader's first state change already fences."""
    late, new = _segment(10, 19), _segment(10, 24)
    records = [
        *stamped([event(late, COPY_SEGMENT_STARTED)], 1),
        *stamped([event(new, COPY_SEGMENT_STARTED)], 2),
        *stamped([event(late, COPY_SEGMENT_FINISHED)], 1),
    ]
    for replica in _replayed(records):
        assert _served(replica) == [] and replica.copied_end == -1
        assert [m.segment_id for m in replica.orphans] == [late.segment_id, new.segment_id]


def test_records_in_epoch_order_are_all_applied() -> None:
    """Leaders succeeding each other (and the same epoch writing again) fence nothing."""
    first, second, third = _segment(0, 9), _segment(10, 19), _segment(20, 29)
    records = [
        *stamped([event(first, COPY_SEGMENT_STARTED), event(first, COPY_SEGMENT_FINISHED)], 0),
        leader_epoch_record(3),
        *stamped([event(second, COPY_SEGMENT_STARTED), event(second, COPY_SEGMENT_FINISHED)], 3),
        *stamped([event(first, DELETE_SEGMENT_STARTED), log_start_record(10)], 3),
        *stamped([event(third, COPY_SEGMENT_STARTED), event(third, COPY_SEGMENT_FINISHED)], 5),
    ]
    for replica in _replayed(records):
        assert _served(replica) == [second.segment_id, third.segment_id]
        assert replica.copied_end == 29 and replica.log_start_offset == 10
        assert [m.segment_id for m in replica.orphans] == [first.segment_id]


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
