"""ListConfigResources: v0 client metrics only; v1 by type, unsupported types refused."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import list_config_resources
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make

from .harness import call


def listed(broker: Broker, version: int, *types: int) -> tuple[ErrorCode, list[tuple[int, str]]]:
    def build(m: Any) -> Any:
        return make(m.ListConfigResourcesRequest, resource_types=types)

    response = call(broker, list_config_resources.API, version, build)
    resources = [
        (getattr(r, "resource_type", 16), r.resource_name) for r in response.config_resources
    ]
    return response.error_code, resources


@pytest.fixture
def with_topic(broker: Broker) -> Broker:
    assert broker.admin_manager.create_topic("t")[0].ok
    return broker


def test_v0_lists_client_metrics_only(with_topic: Broker) -> None:
    assert listed(with_topic, 0) == (ErrorCode.none, [])


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        ((), [(8, "0"), (4, "0"), (2, "t")]),
        ((2,), [(2, "t")]),
        ((4, 8), [(8, "0"), (4, "0")]),
        ((16, 32), []),
    ],
)
def test_v1_lists_the_requested_types(with_topic: Broker, types: Any, expected: Any) -> None:
    assert listed(with_topic, 1, *types) == (ErrorCode.none, expected)


def test_v1_refuses_a_type_it_does_not_list(with_topic: Broker) -> None:
    assert listed(with_topic, 1, 2, 1) == (ErrorCode.unsupported_version, [])
