"""Metadata for a topic whose partitions' states a broker has not all read yet (the controller
writes them one by one): Kafka's metadata cache holds a topic with all its partitions or not
at all, so the topic is answered LEADER_NOT_AVAILABLE, never with fewer partitions (librdkafka
then refuses records for the missing ones: "Local: Unknown partition")."""

from __future__ import annotations

import uuid
from pathlib import Path

from cluster_fixtures import SharedCluster
from kio.schema.errors import ErrorCode

from kafkalite.apis import metadata as metadata_api
from kafkalite.broker.broker import Broker, local_broker_info
from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.partition import PartitionState
from kafkalite.config import build_config
from tests.apis.harness import call

REPLICAS = (1,)


def metadata_of(broker: Broker, topic: str) -> object:
    response = call(
        broker,
        metadata_api.API,
        12,
        lambda m: m.MetadataRequest(
            topics=(m.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    (answer,) = response.topics
    return answer


def test_a_topic_is_answered_with_all_its_partitions_or_not_yet(tmp_path: Path) -> None:
    cluster = SharedCluster()
    config = build_config({"log.dirs": str(tmp_path), "broker.id": "1"})
    cluster.brokers[1] = local_broker_info(config)
    broker = Broker.open(config, metadata=cluster.view(1))
    try:
        topic = TopicMetadata("t", uuid.uuid4(), 3, 1)
        cluster.topics["t"] = topic
        for partition in (0, 1):  # partition 2's state not read yet
            cluster.announce(PartitionState("t", partition, REPLICAS, 1, 0, REPLICAS))

        answer = metadata_of(broker, "t")
        assert answer.error_code == ErrorCode.leader_not_available
        assert answer.partitions == ()

        cluster.announce(PartitionState("t", 2, REPLICAS, 1, 0, REPLICAS))
        answer = metadata_of(broker, "t")
        assert answer.error_code == ErrorCode.none
        assert [p.partition_index for p in answer.partitions] == [0, 1, 2]
    finally:
        broker.shutdown()
