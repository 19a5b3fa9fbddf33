"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), versions 0-1, on a real in-process
`Broker`: requests and responses through kio's wire codec, the group persisted in
`__consumer_offsets` and replayed by a fresh coordinator service."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import consumer_group_describe, consumer_group_heartbeat
from kafkalite.apis.registry import HANDLERS
from kafkalite.broker.broker import Broker
from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
from kafkalite.protocol.entities import make

from .harness import call

TOPIC = "orders"
GROUP = "cg-a"
VERSIONS = (0, 1)


@pytest.fixture
def broker(broker_factory: Callable[..., Broker]) -> Broker:
    broker = broker_factory(**{"offsets.topic.num.partitions": "1"})
    assert broker.admin_manager.create_topic(TOPIC, 3, 1)[0].ok
    return broker


def heartbeat(broker: Broker, version: int, member_id: str, epoch: int, **fields: Any) -> Any:
    def build(m: Any) -> Any:
        values: dict[str, Any] = {
            "group_id": GROUP,
            "member_id": member_id,
            "member_epoch": epoch,
            "rebalance_timeout": datetime.timedelta(seconds=30),
            "subscribed_topic_names": (TOPIC,),
            "topic_partitions": (),
        }
        if epoch != 0:
            values.update(rebalance_timeout=datetime.timedelta(milliseconds=-1))
            values.update(subscribed_topic_names=None, topic_partitions=None)
        return make(m.ConsumerGroupHeartbeatRequest, **{**values, **fields})

    return call(broker, consumer_group_heartbeat.API, version, build)


def describe(broker: Broker, version: int, *groups: str) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.ConsumerGroupDescribeRequest, group_ids=groups, include_authorized_operations=True
        )

    return call(broker, consumer_group_describe.API, version, build)


def test_api_versions_advertise_both_apis() -> None:
    for key in (68, 69):
        assert (HANDLERS[key].min_version, HANDLERS[key].max_version) == (0, 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_join_gets_every_partition_and_kafkas_heartbeat_interval(
    broker: Broker, version: int
) -> None:
    response = heartbeat(broker, version, "m-1", 0)
    assert (response.error_code, response.member_id, response.member_epoch) == (
        ErrorCode.none,
        "m-1",
        1,
    )
    assert response.heartbeat_interval == datetime.timedelta(milliseconds=5000)
    topic_id = broker.replica_manager.topics[TOPIC].topic_id
    (assigned,) = response.assignment.topic_partitions
    assert (assigned.topic_id, assigned.partitions) == (topic_id, (0, 1, 2))
    again = heartbeat(broker, version, "m-1", 1)
    assert (again.error_code, again.member_epoch, again.assignment) == (ErrorCode.none, 1, None)


def test_v0_names_the_member_v1_requires_a_member_id(broker: Broker) -> None:
    assert heartbeat(broker, 0, "", 0).member_id
    refused = heartbeat(broker, 1, "", 0)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.invalid_request,
        "MemberId can't be empty.",
    )


def test_errors_are_answered_with_kafkas_codes(broker: Broker) -> None:
    heartbeat(broker, 1, "m-1", 0)
    assert heartbeat(broker, 1, "m-1", 7).error_code is ErrorCode.fenced_member_epoch
    assert heartbeat(broker, 1, "ghost", 3).error_code is ErrorCode.unknown_member_id
    assert heartbeat(broker, 1, "m-2", 0, server_assignor="x").error_code is (
        ErrorCode.unsupported_assignor
    )
    regex = heartbeat(broker, 1, "m-3", 0, subscribed_topic_regex="ord(")
    assert regex.error_code is ErrorCode.invalid_regular_expression
    left = heartbeat(broker, 1, "m-1", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


def test_v1_subscribes_by_regex(broker: Broker) -> None:
    response = heartbeat(
        broker, 1, "m-1", 0, subscribed_topic_names=None, subscribed_topic_regex="ord.*"
    )
    (assigned,) = response.assignment.topic_partitions
    assert (response.error_code, assigned.partitions) == (ErrorCode.none, (0, 1, 2))


@pytest.mark.parametrize("version", VERSIONS)
def test_describe(broker: Broker, version: int) -> None:
    heartbeat(broker, 1, "m-1", 0, instance_id="static-1")
    response = describe(broker, version, GROUP, "nobody", "")
    empty, group, missing = response.groups  # Kafka answers invalid group ids first
    assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (
        ErrorCode.none,
        "Stable",
        1,
        "uniform",
    )
    (member,) = group.members
    assert (member.member_id, member.instance_id, member.member_epoch) == ("m-1", "static-1", 1)
    assert member.subscribed_topic_names == (TOPIC,)
    (assigned,) = member.assignment.topic_partitions
    assert (assigned.topic_name, assigned.partitions) == (TOPIC, (0, 1, 2))
    assert member.target_assignment == member.assignment
    if version >= 1:
        assert member.member_type == 1
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.group_id_not_found,
        "Group nobody not found.",
    )
    assert empty.error_code is ErrorCode.invalid_group_id


def test_the_group_is_replayed_from_consumer_offsets(broker: Broker) -> None:
    heartbeat(broker, 1, "m-1", 0)
    heartbeat(broker, 1, "m-2", 0)
    heartbeat(broker, 1, "m-1", 1, topic_partitions=())  # revoke everything for m-2's share
    before = broker.groups.coordinator.consumer_group_describe(GROUP)
    fresh = GroupCoordinatorService(broker.config, broker.replica_manager)
    fresh.load()
    after = fresh.coordinator.consumer_group_describe(GROUP)
    assert after == before
    assert (after.group_epoch, len(after.members)) == (2, 2)
