"""Well-formed requests with odd field values the fuzzer (fuzz/) found handlers failing on: each
gets Kafka's answer, and the broker logs no error."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.testing import BrokerProcess, error_records
from protocol_tests.raw_client import RawClient, build

UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42


def _offset_fetch_v10(topic_id: uuid.UUID) -> object:
    topics = build(9, 10, "OffsetFetchRequestTopics", topic_id=topic_id, partition_indexes=(0,))
    group = build(
        9,
        10,
        "OffsetFetchRequestGroup",
        group_id="odd-values",
        member_id=None,
        member_epoch=-1,
        topics=(topics,),
    )
    return build(9, 10, "OffsetFetchRequest", groups=(group,), require_stable=False)


@pytest.mark.parametrize(
    "topic_id", [uuid.UUID(int=0), uuid.UUID(int=0x5EED)], ids=["zero", "unknown"]
)
def test_offset_fetch_v10_unknown_topic_id(
    broker: BrokerProcess, client: RawClient, topic_id: uuid.UUID
) -> None:
    """The zero id (which kio reads as None) raised ValueError in the handler."""
    since = len(broker.lines)
    response = client.request(_offset_fetch_v10(topic_id))
    (group,) = response.groups
    (topic,) = group.topics
    (partition,) = topic.partitions
    assert (group.error_code, partition.error_code) == (0, UNKNOWN_TOPIC_ID)
    assert (topic.topic_id or uuid.UUID(int=0)) == topic_id
    assert error_records(broker.lines[since:]) == []


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_null_topic_name_before_v12(
    broker: BrokerProcess, client: RawClient, version: int
) -> None:
    """v10-11 have a topic id field but no null names in the response: Kafka refuses the null
    name ("Topic name can not be null for version 10"); the handler failed to encode it."""
    since = len(broker.lines)
    topic = build(3, version, "MetadataRequestTopic", name=None, topic_id=uuid.UUID(int=0x5EED))
    request = build(
        3,
        version,
        "MetadataRequest",
        topics=(topic,),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    (answer,) = client.request(request).topics
    assert (answer.error_code, answer.name, answer.partitions) == (INVALID_REQUEST, "", ())
    assert error_records(broker.lines[since:]) == []
