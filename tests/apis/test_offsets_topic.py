"""`__consumer_offsets`: commits reach the compacted topic, compaction keeps the latest value
per key, and a restart replays what survived."""

from __future__ import annotations

from collections.abc import Callable

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.broker import Broker
from kafkalite.broker.group_coordinator_service import (
    OFFSETS_TOPIC,
    GroupCoordinatorService,
    log_records,
)
from kafkalite.coordinator import OffsetCommitRequest, PartitionCommit, TopicPartition
from kafkalite.coordinator.records import decode_key

GROUP = "compacted-group"
OVERRIDES = {
    "offsets.topic.num.partitions": "1",
    # Tiny segments, so commits roll several and the cleaner has closed ones to compact.
    "offsets.topic.segment.bytes": "2048",
}


def commit(broker: Broker, partition: int, offset: int, metadata: str = "") -> None:
    request = OffsetCommitRequest(
        GROUP, (PartitionCommit("t", partition, offset, 4, metadata),), api_version=9
    )
    response = trio.run(broker.groups.commit_offsets, request)
    assert [p.error for p in response.partitions] == [ErrorCode.none]


def offsets_records(broker: Broker) -> list[tuple[object, bytes | None]]:
    partition = broker.replica_manager.topics[OFFSETS_TOPIC].partitions[0]
    return [(decode_key(record.key), record.value) for record in log_records(partition.log)]


def test_commits_are_compacted_to_the_latest_value_per_key(
    broker_factory: Callable[..., Broker],
) -> None:
    broker = broker_factory(**OVERRIDES)
    broker.admin_manager.create_topic("t", 2)
    for offset in range(200):
        commit(broker, offset % 2, offset, metadata=f"m{offset}")
    before = len(offsets_records(broker))
    assert before == 200

    assert broker.replica_manager.clean_logs() > 0

    records = offsets_records(broker)
    keys = [key for key, _ in records]
    # Closed segments keep one value per key; the active segment is never cleaned.
    assert len(records) < before / 4
    assert len(set(keys)) == 2
    partition = broker.replica_manager.topics[OFFSETS_TOPIC].partitions[0]
    assert partition.log_end_offset == 200  # offsets keep their numbers

    reloaded = GroupCoordinatorService(broker.config, broker.replica_manager)
    reloaded.load()
    for index, last in ((0, 198), (1, 199)):
        value = reloaded.coordinator.committed(GROUP, TopicPartition("t", index))
        assert value is not None
        assert (value.offset, value.leader_epoch, value.metadata) == (last, 4, f"m{last}")


def test_a_deleted_group_leaves_only_tombstones_that_replay_to_nothing(
    broker_factory: Callable[..., Broker],
) -> None:
    broker = broker_factory(**OVERRIDES)
    broker.admin_manager.create_topic("t", 2)
    for offset in range(100):
        commit(broker, offset % 2, offset)
    deleted = broker.groups.call(lambda c, now: c.delete_groups([GROUP], now))
    assert deleted == ({GROUP: ErrorCode.none}, {})
    broker.replica_manager.clean_logs()

    reloaded = GroupCoordinatorService(broker.config, broker.replica_manager)
    reloaded.load()
    assert reloaded.coordinator.committed(GROUP, TopicPartition("t", 0)) is None
    assert reloaded.coordinator.group(GROUP) is None
