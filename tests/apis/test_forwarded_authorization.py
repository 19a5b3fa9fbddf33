"""A request another broker forwarded (ElectLeaders, to the controller) is authorized as
Kafka authorizes an Envelope: the forwarding broker checked the client's ALTER, the
controller asks the broker's principal for CLUSTER_ACTION only. Brokers talking PLAINTEXT
are User:ANONYMOUS, which an operator grants ClusterAction rather than Alter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis import elect_leaders
from kafkalite.apis.base import RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.principal import ANONYMOUS

from .harness import request_module, run_handler

TOPIC = "orders"


def elect_as_anonymous(broker: Broker, client_id: str) -> Any:
    ctx = RequestContext(
        broker,
        elect_leaders.API.api_key,
        2,
        correlation_id=7,
        client_id=client_id,
        client_host="/127.0.0.1",
        principal=ANONYMOUS,
        authorizer=broker.authorizer,
    )
    m = request_module(elect_leaders.API.api_key, 2)
    partitions = (make(m.TopicPartitions, topic=TOPIC, partitions=(0,)),)
    request = make(m.ElectLeadersRequest, election_type=0, topic_partitions=partitions)
    return run_handler(elect_leaders.API, ctx, request)


def test_forwarded_elect_leaders_needs_cluster_action(
    broker_factory: Callable[..., Broker],
) -> None:
    broker = broker_factory(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    broker.admin_manager.create_topic(TOPIC, 1, 1)
    assert broker.authorizer is not None
    cluster_action = AclBinding(
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
        AccessControlEntry(
            "User:ANONYMOUS", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW
        ),
    )
    trio.run(broker.authorizer.create_acls, [cluster_action])

    forwarded = elect_as_anonymous(broker, elect_leaders.FORWARDED)
    assert forwarded.error_code == ErrorCode.none
    (result,) = forwarded.replica_election_results[0].partition_result
    assert result.error_code == ErrorCode.election_not_needed

    from_a_client = elect_as_anonymous(broker, "adminclient-1")  # Alter needed: not granted
    assert from_a_client.error_code == ErrorCode.cluster_authorization_failed
