"""AlterPartitionReassignments and ListPartitionReassignments on a single node: answered as a
one-broker Kafka answers (the node is the controller; only its own assignment is valid)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import alter_partition_reassignments, list_partition_reassignments
from kafkalite.broker.broker import Broker
from kafkalite.config import build_config
from kafkalite.protocol.entities import make

from .harness import call


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker.open(build_config({"log.dirs": str(tmp_path)}))
    assert broker.admin_manager.create_topic("t", 1)[0].ok
    yield broker
    broker.shutdown()


def alter(broker: Broker, version: int, topic: str, replicas: list[int] | None) -> Any:
    def build(m: Any) -> Any:
        partition = make(m.ReassignablePartition, partition_index=0, replicas=replicas)
        topics = (make(m.ReassignableTopic, name=topic, partitions=(partition,)),)
        return make(m.AlterPartitionReassignmentsRequest, topics=topics)

    response = call(broker, alter_partition_reassignments.API, version, build)
    assert response.error_code is ErrorCode.none
    (result,) = response.responses[0].partitions
    return result.error_code, result.error_message


@pytest.mark.parametrize("version", [0, 1])
def test_alter_on_a_single_node(broker: Broker, version: int) -> None:
    node = broker.node_id
    assert alter(broker, version, "t", [node]) == (ErrorCode.none, None)
    assert alter(broker, version, "t", None) == (ErrorCode.no_reassignment_in_progress, None)
    assert alter(broker, version, "t", [node, node + 1]) == (
        ErrorCode.invalid_replica_assignment,
        f"Replica assignment has brokers that are not alive. Replica list: [{node + 1}],"
        f" live broker list: [{node}]",
    )
    assert alter(broker, version, "t", [])[0] is ErrorCode.invalid_replica_assignment
    assert alter(broker, version, "nope", [node]) == (
        ErrorCode.unknown_topic_or_partition,
        "The partition does not exist.",
    )


def test_list_on_a_single_node_is_empty(broker: Broker) -> None:
    def build(m: Any) -> Any:
        return make(m.ListPartitionReassignmentsRequest, topics=None)

    response = call(broker, list_partition_reassignments.API, 0, build)
    assert (response.error_code, response.topics) == (ErrorCode.none, ())


def test_a_view_is_not_reassigned(broker: Broker) -> None:
    """A view has its source's replicas (issue 18): moving it is refused, naming the source."""
    configs = {"kafkalite.view.source": "t", "kafkalite.view.filter": "region = 'eu'"}
    assert broker.admin_manager.create_topic("t.v", configs=configs)[0].ok
    assert alter(broker, 1, "t.v", [broker.node_id]) == (
        ErrorCode.invalid_request,
        "t.v is a view of t: it has its source's replicas; reassign t.",
    )
