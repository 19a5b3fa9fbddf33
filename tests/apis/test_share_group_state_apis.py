"""The inter-broker share-state RPCs (83-87) called directly as `User:alice` on a broker
with an authorizer: brokers only, ClusterAction on the cluster as Kafka's KafkaApis checks;
without it every partition is answered CLUSTER_AUTHORIZATION_FAILED and nothing is written."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis import (
    delete_share_group_state,
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.principal import KafkaPrincipal

from .harness import request_module, roundtrip, run_handler

ALICE = KafkaPrincipal("User", "alice")
GROUP, TOPIC_ID = "workers", uuid.uuid4()


def _initialize(m: Any) -> Any:
    partition = m.PartitionData(partition=0, state_epoch=0, start_offset=3)
    topic = m.InitializeStateData(topic_id=TOPIC_ID, partitions=(partition,))
    return m.InitializeShareGroupStateRequest(group_id=GROUP, topics=(topic,))


def _read(m: Any) -> Any:
    topic = m.ReadStateData(
        topic_id=TOPIC_ID, partitions=(m.PartitionData(partition=0, leader_epoch=0),)
    )
    return m.ReadShareGroupStateRequest(group_id=GROUP, topics=(topic,))


def _write(m: Any) -> Any:
    partition = m.PartitionData(
        partition=0, state_epoch=0, leader_epoch=0, start_offset=3, state_batches=()
    )
    topic = m.WriteStateData(topic_id=TOPIC_ID, partitions=(partition,))
    return m.WriteShareGroupStateRequest(group_id=GROUP, topics=(topic,))


def _delete(m: Any) -> Any:
    topic = m.DeleteStateData(topic_id=TOPIC_ID, partitions=(m.PartitionData(partition=0),))
    return m.DeleteShareGroupStateRequest(group_id=GROUP, topics=(topic,))


def _summary(m: Any) -> Any:
    topic = m.ReadStateSummaryData(
        topic_id=TOPIC_ID, partitions=(m.PartitionData(partition=0, leader_epoch=0),)
    )
    return m.ReadShareGroupStateSummaryRequest(group_id=GROUP, topics=(topic,))


CASES = [
    (initialize_share_group_state.API, 0, _initialize),
    (read_share_group_state.API, 0, _read),
    (write_share_group_state.API, 1, _write),
    (delete_share_group_state.API, 0, _delete),
    (read_share_group_state_summary.API, 1, _summary),
]


def call_as_alice(broker: Broker, api: ApiHandler, version: int, build: Any) -> ErrorCode:
    ctx = RequestContext(
        broker,
        api.api_key,
        version,
        correlation_id=7,
        client_id="tests",
        client_host="/127.0.0.1",
        principal=ALICE,
        authorizer=broker.authorizer,
    )
    response = run_handler(api, ctx, build(request_module(api.api_key, version)))
    roundtrip(response)
    [topic] = response.results
    [partition] = topic.partitions
    return partition.error_code


@pytest.fixture
def secured(broker_factory: Callable[..., Broker]) -> Broker:
    return broker_factory(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})


@pytest.mark.parametrize(
    ("api", "version", "build"), CASES, ids=[f"key-{api.api_key}" for api, _, _ in CASES]
)
def test_without_cluster_action_every_partition_is_refused(
    secured: Broker, api: ApiHandler, version: int, build: Any
) -> None:
    assert call_as_alice(secured, api, version, build) is ErrorCode.cluster_authorization_failed
    assert secured.share_groups is not None
    assert secured.share_groups.partitions.coordinator.states == {}


def test_with_cluster_action_the_share_coordinator_answers(secured: Broker) -> None:
    assert secured.authorizer is not None
    allow = AccessControlEntry(
        "User:alice", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW
    )
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    trio.run(secured.authorizer.create_acls, [AclBinding(cluster, allow)])
    answers = [call_as_alice(secured, api, version, build) for api, version, build in CASES]
    # initialize, read, write, delete (the state goes), summary: all answered NONE.
    assert answers == [ErrorCode.none] * len(CASES)
    assert secured.share_groups is not None
    assert secured.share_groups.partitions.coordinator.states == {}
