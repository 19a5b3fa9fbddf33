"""FindCoordinator: groups and transactional ids are coordinated here (the leaders of their
`__consumer_offsets` / `__transaction_state` partitions, created on first lookup)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import find_coordinator
from kafkalite.broker.broker import Broker
from kafkalite.broker.group_coordinator_service import OFFSETS_TOPIC
from kafkalite.protocol.entities import make

from .harness import call


def find(broker: Broker, version: int, key_type: int, *keys: str) -> Any:
    def build(m: Any) -> Any:
        return make(m.FindCoordinatorRequest, key=keys[0], key_type=key_type, coordinator_keys=keys)

    return call(broker, find_coordinator.API, version, build)


@pytest.mark.parametrize("version", [0, 3])
def test_a_group_is_coordinated_here_and_creates_the_offsets_topic(
    broker: Broker, version: int
) -> None:
    response = find(broker, version, 0, "g")
    assert (response.error_code, response.node_id) == (ErrorCode.none, broker.node_id)
    assert OFFSETS_TOPIC in broker.replica_manager.topics


def test_batched_keys_and_transactional_ids(broker: Broker) -> None:
    (group,) = find(broker, 4, 0, "g").coordinators
    assert (group.key, group.error_code, group.node_id) == ("g", ErrorCode.none, broker.node_id)
    (txn,) = find(broker, 4, 1, "txn-1").coordinators
    assert (txn.key, txn.error_code, txn.node_id) == ("txn-1", ErrorCode.none, broker.node_id)
    assert broker.replica_manager.topics["__transaction_state"].metadata.num_partitions == 50
