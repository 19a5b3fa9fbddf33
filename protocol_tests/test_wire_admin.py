"""Admin requests on the wire where client libraries hide details (DescribeConfigs synonyms,
DeleteRecords on a missing partition)."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, build, create_topics_request, unique_name

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
RESOURCE_TOPIC = 2


def _describe_topic_config(client: RawClient, topic: str, key: str) -> object:
    resource = build(
        32,
        4,
        "DescribeConfigsResource",
        resource_type=RESOURCE_TOPIC,
        resource_name=topic,
        configuration_keys=(key,),
    )
    request = build(
        32,
        4,
        "DescribeConfigsRequest",
        resources=(resource,),
        include_synonyms=True,
        include_documentation=False,
    )
    (result,) = client.request(request).results
    assert result.error_code == NONE
    (config,) = result.configs
    return config


def test_describe_configs_synonym_chain(
    broker_factory: Callable[..., BrokerProcess], connect: Callable[..., RawClient]
) -> None:
    """Topic override, then the broker's static setting, then the default (Kafka's order)."""
    broker = broker_factory({"log.retention.hours": "100"})
    client = connect(broker)
    overridden, plain = unique_name("syn"), unique_name("plain")
    created = client.request(create_topics_request(overridden, configs={"retention.ms": "5000"}))
    assert created.topics[0].error_code == NONE
    assert client.request(create_topics_request(plain)).topics[0].error_code == NONE

    config = _describe_topic_config(client, overridden, "retention.ms")
    assert (config.value, config.config_source) == ("5000", SOURCE_TOPIC)
    chain = [(s.name, s.value, s.source) for s in config.synonyms]
    assert chain[:2] == [
        ("retention.ms", "5000", SOURCE_TOPIC),
        ("log.retention.hours", "100", SOURCE_STATIC_BROKER),
    ]
    assert chain[-1][2] == SOURCE_DEFAULT

    config = _describe_topic_config(client, plain, "retention.ms")
    assert (config.value, config.config_source) == (str(100 * 3_600_000), SOURCE_STATIC_BROKER)
    assert [s.source for s in config.synonyms][:1] == [SOURCE_STATIC_BROKER]


def test_delete_records_unknown_partition(
    client: RawClient, new_topic: Callable[..., tuple[str, object]]
) -> None:
    topic, _ = new_topic()
    partitions = tuple(
        build(21, 2, "DeleteRecordsPartition", partition_index=index, offset=0) for index in (0, 5)
    )
    request = build(
        21,
        2,
        "DeleteRecordsRequest",
        topics=(build(21, 2, "DeleteRecordsTopic", name=topic, partitions=partitions),),
        timeout=datetime.timedelta(seconds=10),
    )
    (topic_result,) = client.request(request).topics
    codes = {p.partition_index: p.error_code for p in topic_result.partitions}
    assert codes == {0: NONE, 5: UNKNOWN_TOPIC_OR_PARTITION}
