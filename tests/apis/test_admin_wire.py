"""Admin APIs through the wire codec: request frame in, handler, response frame out.

Requests are written by kio at every version each API advertises, decoded by the codec from
the registry's table, answered, and the response frame read back.
"""

from __future__ import annotations

import datetime
import io
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.serial import entity_writer

from kafkalite.apis.base import RequestContext
from kafkalite.apis.registry import HANDLERS
from kafkalite.broker.broker import Broker
from kafkalite.protocol.codec import DecodedRequest, decode_request
from kafkalite.protocol.entities import make

from .harness import request_module, roundtrip, run_handler

TIMEOUT = datetime.timedelta(seconds=5)


def _create_topics(m: Any) -> Any:
    topic = make(
        m.CreatableTopic,
        name="wire-new",
        num_partitions=2,
        replication_factor=-1,
        assignments=(),
        configs=(make(m.CreatableTopicConfig, name="retention.ms", value="1000"),),
    )
    return make(m.CreateTopicsRequest, topics=(topic,), timeout=TIMEOUT, validate_only=True)


def _delete_topics(m: Any) -> Any:
    if hasattr(m, "DeleteTopicState"):
        states = (
            make(m.DeleteTopicState, name="ghost", topic_id=None),
            make(m.DeleteTopicState, name=None, topic_id=uuid.uuid4()),
        )
        return make(m.DeleteTopicsRequest, topics=states, timeout=TIMEOUT)
    return make(m.DeleteTopicsRequest, topic_names=("ghost",), timeout=TIMEOUT)


def _delete_records(m: Any) -> Any:
    partitions = (
        make(m.DeleteRecordsPartition, partition_index=0, offset=-1),
        make(m.DeleteRecordsPartition, partition_index=9, offset=0),
    )
    topic = make(m.DeleteRecordsTopic, name="wire", partitions=partitions)
    return make(m.DeleteRecordsRequest, topics=(topic,), timeout=TIMEOUT)


def _describe_configs(m: Any) -> Any:
    resources = (
        make(
            m.DescribeConfigsResource,
            resource_type=2,
            resource_name="wire",
            configuration_keys=None,
        ),
        make(
            m.DescribeConfigsResource, resource_type=4, resource_name="0", configuration_keys=None
        ),
        make(
            m.DescribeConfigsResource, resource_type=2, resource_name="ghost", configuration_keys=()
        ),
    )
    return make(
        m.DescribeConfigsRequest,
        resources=resources,
        include_synonyms=True,
        include_documentation=True,
    )


def _create_partitions(m: Any) -> Any:
    topics = (
        make(m.CreatePartitionsTopic, name="wire", count=3, assignments=None),
        make(m.CreatePartitionsTopic, name="ghost", count=3, assignments=None),
    )
    return make(m.CreatePartitionsRequest, topics=topics, timeout=TIMEOUT, validate_only=True)


def _incremental_alter_configs(m: Any) -> Any:
    ops = (make(m.AlterableConfig, name="cleanup.policy", config_operation=2, value="compact"),)
    resources = (
        make(m.AlterConfigsResource, resource_type=2, resource_name="wire", configs=ops),
        make(m.AlterConfigsResource, resource_type=4, resource_name="0", configs=()),
    )
    return make(m.IncrementalAlterConfigsRequest, resources=resources, validate_only=True)


def _describe_cluster(m: Any) -> Any:
    return make(
        m.DescribeClusterRequest,
        include_cluster_authorized_operations=True,
        endpoint_type=1,
        include_fenced_brokers=False,
    )


BUILDERS: dict[int, Callable[[Any], Any]] = {
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    32: _describe_configs,
    37: _create_partitions,
    44: _incremental_alter_configs,
    60: _describe_cluster,
}

CASES = [
    (key, version)
    for key in BUILDERS
    for version in range(HANDLERS[key].min_version, HANDLERS[key].max_version + 1)
]


def request_frame(api_key: int, version: int, body: Any, correlation_id: int) -> bytes:
    header_cls = type(body).__header_schema__
    header = make(
        header_cls,
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="wire-test",
    )
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header)
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_admin_request_frame_round_trip(broker: Broker, api_key: int, version: int) -> None:
    manager = broker.replica_manager
    outcome, _ = broker.admin_manager.create_topic("wire", 1, 1, {})
    assert outcome.ok
    body = BUILDERS[api_key](request_module(api_key, version))
    decoded = decode_request(request_frame(api_key, version, body, 42), HANDLERS)
    assert isinstance(decoded, DecodedRequest)
    assert (decoded.api_version, decoded.correlation_id, decoded.body) == (version, 42, body)
    ctx = RequestContext(broker, api_key, version, decoded.correlation_id, decoded.client_id)
    response = run_handler(HANDLERS[decoded.api_key], ctx, decoded.body)
    assert roundtrip(response, 42) == response
    # validate_only everywhere: the topic is as it was
    topic = manager.topics["wire"]
    assert (len(topic.partitions), topic.metadata.configs) == (1, {})
    assert "wire-new" not in manager.topics
