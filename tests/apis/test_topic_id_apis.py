"""OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-516)."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import offset_commit, offset_fetch
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make

from .harness import call

GROUP = "topic-id-group"


def commit(broker: Broker, topic_id: uuid.UUID, offset: int) -> Any:
    def build(m: Any) -> Any:
        partition = make(
            m.OffsetCommitRequestPartition,
            partition_index=0,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata="meta",
        )
        topic = make(m.OffsetCommitRequestTopic, topic_id=topic_id, partitions=(partition,))
        return make(
            m.OffsetCommitRequest,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(topic,),
        )

    return call(broker, offset_commit.API, 10, build)


def fetch(broker: Broker, topic_id: uuid.UUID) -> Any:
    def build(m: Any) -> Any:
        topic = make(m.OffsetFetchRequestTopics, topic_id=topic_id, partition_indexes=(0,))
        group = make(
            m.OffsetFetchRequestGroup,
            group_id=GROUP,
            member_id=None,
            member_epoch=-1,
            topics=(topic,),
        )
        return make(m.OffsetFetchRequest, groups=(group,), require_stable=False)

    return call(broker, offset_fetch.API, 10, build)


def test_commit_and_fetch_by_topic_id(broker: Broker) -> None:
    _, topic = broker.admin_manager.create_topic("by-id", 1)
    assert topic is not None
    (committed,) = commit(broker, topic.topic_id, 42).topics
    assert committed.topic_id == topic.topic_id
    assert committed.partitions[0].error_code == ErrorCode.none
    ((fetched,),) = (group.topics for group in fetch(broker, topic.topic_id).groups)
    assert fetched.topic_id == topic.topic_id
    partition = fetched.partitions[0]
    assert (partition.committed_offset, partition.metadata) == (42, "meta")


def test_unknown_topic_id(broker: Broker) -> None:
    unknown = uuid.uuid4()
    (committed,) = commit(broker, unknown, 1).topics
    assert committed.topic_id == unknown
    assert committed.partitions[0].error_code == ErrorCode.unknown_topic_id
    ((fetched,),) = (group.topics for group in fetch(broker, unknown).groups)
    assert fetched.topic_id == unknown
    assert fetched.partitions[0].error_code == ErrorCode.unknown_topic_id
