"""Share group APIs (KIP-932) on the wire, with kio's request and response structs over a raw
socket (protocol_tests/raw_client.py) to an embedded broker: what the stock clients do not
show (epochs, session errors, acknowledgement errors, the advertised versions), a consumer
that hangs holding records (another gets them once the acquisition lock expires) and one
whose connection closes (its records are released at once).
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from kio.schema.errors import ErrorCode

from kafkalite.broker.partition_loader import log_chunks
from kafkalite.broker.share_persister import initialize_request
from kafkalite.share.share_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    decode_key,
    kafka_uuid,
)
from kafkalite.storage.records import decode_records
from kafkalite.testing import EmbeddedBroker
from protocol_tests.raw_client import RawClient, build, request_class, response_class

LOCK_MS = 1000
BROKER = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": str(LOCK_MS),
}
HEARTBEAT, DESCRIBE, SHARE_FETCH, SHARE_ACK = 76, 77, 78, 79
ACCEPT = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("share"), BROKER) as running:
        yield running


@pytest.fixture
def client(broker: EmbeddedBroker) -> Iterator[RawClient]:
    with RawClient(broker.host, broker.port) as raw:
        yield raw


def schema(api_key: int, version: int) -> Any:
    """kio's request module of the API version (its structs build the request)."""
    return __import__(request_class(api_key, version).__module__, fromlist=["_"])


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def heartbeat(client: RawClient, group: str, member: str, epoch: int, topics: Any = None) -> Any:
    m = schema(HEARTBEAT, 1)
    return client.request(
        m.ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
        )
    )


def share_fetch(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    acks: tuple[tuple[int, int, int], ...] = (),
    max_wait: int = 0,
) -> Any:
    m = schema(SHARE_FETCH, 2)
    batches = tuple(
        m.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=(t,))
        for f, la, t in acks
    )
    return client.request(
        m.ShareFetchRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=ms(max_wait),
            min_bytes=1,
            max_records=100,
            batch_size=100,
            topics=(
                m.FetchTopic(
                    topic_id=topic_id,
                    partitions=(
                        m.FetchPartition(partition_index=0, acknowledgement_batches=batches),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
    )


def share_ack(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    first: int,
    last: int,
) -> Any:
    m = schema(SHARE_ACK, 2)
    batch = m.AcknowledgementBatch(
        first_offset=first, last_offset=last, acknowledge_types=(ACCEPT,)
    )
    return client.request(
        m.ShareAcknowledgeRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            topics=(
                m.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=(
                        m.AcknowledgePartition(partition_index=0, acknowledgement_batches=(batch,)),
                    ),
                ),
            ),
        )
    )


def produce(broker: EmbeddedBroker, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(20) == 0


def new_queue(broker: EmbeddedBroker) -> tuple[str, uuid.UUID, str]:
    topic = broker.create_topic(f"queue-{uuid.uuid4().hex[:8]}")
    topic_id = broker.call(lambda: broker.broker.metadata.topics[topic].topic_id)
    return topic, topic_id, f"share-{uuid.uuid4().hex[:8]}"


def joined(client: RawClient, group: str, member: str, topic: str, topic_id: uuid.UUID) -> int:
    response = heartbeat(client, group, member, 0, (topic,))
    assert response.error_code is ErrorCode.none
    assert [(t.topic_id, t.partitions) for t in response.assignment.topic_partitions] == [
        (topic_id, (0,))
    ]
    return response.member_epoch


def acquired(response: Any) -> list[tuple[int, int, int]]:
    assert response.error_code is ErrorCode.none, response
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def test_api_versions_and_share_version_feature(client: RawClient) -> None:
    m = schema(18, 3)
    response = client.request(
        m.ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    )
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert [versions[key] for key in (76, 77, 78, 79)] == [(1, 1), (1, 1), (1, 2), (1, 2)]
    assert {(f.name, f.max_version_level) for f in response.finalized_features} >= {
        ("share.version", 2)  # 2: dead-letter topics (KIP-1191)
    }
    assert [versions[key] for key in (90, 91, 92)] == [(0, 1), (0, 0), (0, 0)]
    # The inter-broker share-state RPCs (apis/share_group_state.py), Kafka 4.4's versions.
    assert [versions[key] for key in (83, 84, 85, 86, 87)] == [
        (0, 0),
        (0, 0),
        (0, 1),
        (0, 0),
        (0, 1),
    ]


def test_membership_describe_list_and_find_coordinator(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    topic, topic_id, group = new_queue(broker)
    epoch = joined(client, group, "m1", topic, topic_id)
    second = heartbeat(client, group, "m2", 0, (topic,))
    assert second.member_epoch == epoch + 1  # the group epoch moved
    fenced = heartbeat(client, group, "m1", epoch + 5)
    assert (fenced.error_code, fenced.error_message) == (
        ErrorCode.fenced_member_epoch,
        f"The share group member has a greater member epoch ({epoch + 5}) than the one known "
        f"by the group coordinator ({epoch}). The member must abandon all its partitions and "
        "rejoin.",
    )
    assert heartbeat(client, group, "nobody", 3).error_code is ErrorCode.unknown_member_id

    m = schema(DESCRIBE, 1)
    described = client.request(
        m.ShareGroupDescribeRequest(
            group_ids=(group, "missing"), include_authorized_operations=False
        )
    ).groups
    assert (described[0].group_state, described[0].assignor_name) == ("Stable", "simple")
    # Both members share the one partition (Kafka's simple assignor).
    assert sorted(
        (member.member_id, member.assignment.topic_partitions[0].partitions)
        for member in described[0].members
    ) == [("m1", (0,)), ("m2", (0,))]
    assert described[1].error_code is ErrorCode.group_id_not_found

    lg = schema(16, 5)
    listed = client.request(lg.ListGroupsRequest(states_filter=(), types_filter=("share",))).groups
    assert (group, "share", "Stable") in {(g.group_id, g.group_type, g.group_state) for g in listed}
    consumer_only = client.request(
        lg.ListGroupsRequest(states_filter=(), types_filter=("consumer",))
    ).groups
    assert group not in {g.group_id for g in consumer_only}

    fc = schema(10, 6)
    keys = (f"{group}:{kafka_uuid(topic_id)}:0", f"{group}:{topic_id}:0", "nonsense")
    found = client.request(fc.FindCoordinatorRequest(key_type=2, coordinator_keys=keys))
    # As Kafka 4.4: the topic id in Kafka's Uuid form; any other key is INVALID_REQUEST.
    assert [(c.error_code, c.node_id, c.error_message) for c in found.coordinators] == [
        (ErrorCode.none, broker.broker.node_id, ""),
        (ErrorCode.invalid_request, -1, ""),
        (ErrorCode.invalid_request, -1, ""),
    ]

    assert heartbeat(client, group, "m2", -1).member_epoch == -1

    # Its id is taken: consumer and classic members are refused, as Kafka refuses them.
    cg = schema(68, 1)
    consumer = client.request(
        cg.ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id="c1",
            member_epoch=0,
            rebalance_timeout=ms(30000),
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
    )
    assert consumer.error_code is ErrorCode.group_id_not_found
    jg = schema(11, 9)
    classic = client.request(
        jg.JoinGroupRequest(
            group_id=group,
            session_timeout=ms(10000),
            rebalance_timeout=ms(10000),
            member_id="",
            protocol_type="consumer",
            protocols=(),
        )
    )
    assert classic.error_code is ErrorCode.unknown_member_id


def share_state_keys(broker: Any) -> list[tuple[int, SharePartitionKey]]:
    """Every record key of `__share_group_state` (call in the broker's thread)."""
    partition = broker.replica_manager.partition("__share_group_state", 0)
    return [
        decode_key(record.key)
        for chunk in log_chunks(partition.log)
        for header, batch in chunk
        if not header.is_control
        for record in decode_records(batch)
    ]


def test_sessions_acknowledgements_and_their_errors(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    topic, topic_id, group = new_queue(broker)
    joined(client, group, "m1", topic, topic_id)
    produce(broker, topic, 5)
    # Acknowledgements may not open a session.
    opening = share_fetch(client, group, "m1", 0, topic_id, acks=((0, 0, ACCEPT),))
    assert opening.error_code is ErrorCode.invalid_request
    assert acquired(share_fetch(client, group, "m1", 0, topic_id, max_wait=2000)) == [(0, 4, 1)]
    # Epochs must follow one another.
    assert share_ack(client, group, "m1", 5, topic_id, 0, 1).error_code is (
        ErrorCode.invalid_share_session_epoch
    )
    assert share_ack(client, group, "m1", 0, topic_id, 0, 1).error_code is (
        ErrorCode.invalid_share_session_epoch
    )
    acked = share_ack(client, group, "m1", 1, topic_id, 0, 1)
    assert acked.responses[0].partitions[0].error_code is ErrorCode.none
    # Offset 1 is acknowledged already: the partition's acknowledgement fails, all of it.
    again = share_fetch(client, group, "m1", 2, topic_id, acks=((1, 4, ACCEPT),))
    assert again.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_record_state
    # A long poll with nothing to acquire answers empty after max_wait.
    started = time.monotonic()
    empty = share_fetch(client, group, "m1", 3, topic_id, max_wait=300)
    assert acquired(empty) == [] and time.monotonic() - started >= 0.25
    closing = share_fetch(client, group, "m1", -1, topic_id, acks=((2, 4, ACCEPT),))
    assert closing.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
    assert share_fetch(client, group, "m1", 4, topic_id).error_code is (
        ErrorCode.share_session_not_found
    )
    # What was persisted: everything acknowledged, nothing in flight.
    states = broker.call(lambda: dict(broker.broker.share_groups.partitions.coordinator.states))
    [state] = [state for key, state in states.items() if key.group_id == group]
    assert (state.start_offset, state.batches) == (5, ())
    # In Kafka's records: a ShareSnapshot at initialization, then a ShareUpdate per write.
    written = [
        record_type
        for record_type, key in broker.call(share_state_keys, broker.broker)
        if key.group_id == group
    ]
    assert written == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE]


def received(consumer: ShareConsumer, count: int) -> list[tuple[int, int]]:
    """(offset, delivery count) of the next `count` records the consumer gets."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(got) < count:
        assert time.monotonic() < deadline, got
        got += [(m.offset(), m.delivery_count()) for m in consumer.poll(0.2)]
    return sorted(got)


def test_records_of_a_hung_consumer_go_to_another_when_the_lock_expires(
    broker: EmbeddedBroker,
) -> None:
    topic, topic_id, group = new_queue(broker)
    with RawClient(broker.host, broker.port) as hung:
        joined(hung, group, "hung", topic, topic_id)
        produce(broker, topic, 3)
        assert acquired(share_fetch(hung, group, "hung", 0, topic_id, max_wait=2000)) == [(0, 2, 1)]
        # It keeps its connection, session and membership, and never acknowledges.
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        consumer.subscribe([topic])
        try:
            assert received(consumer, 3) == [(0, 2), (1, 2), (2, 2)]
        finally:
            consumer.close()


def test_the_groups_own_lock_duration_locks_what_it_acquires(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    topic, topic_id, group = new_queue(broker)
    m = schema(44, 1)  # IncrementalAlterConfigs: share.record.lock.duration.ms of the group
    config = m.AlterableConfig(
        name="share.record.lock.duration.ms", config_operation=0, value="4000"
    )
    resource = m.AlterConfigsResource(resource_type=32, resource_name=group, configs=(config,))
    altered = client.request(
        m.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
    )
    assert altered.responses[0].error_code is ErrorCode.none
    joined(client, group, "m1", topic, topic_id)
    produce(broker, topic, 1)
    before = int(time.time() * 1000)
    assert acquired(share_fetch(client, group, "m1", 0, topic_id, max_wait=2000)) == [(0, 0, 1)]
    after = int(time.time() * 1000)

    def deadline() -> int:
        [held] = [
            h for k, h in broker.broker.share_groups.partitions.held.items() if k.group_id == group
        ]
        return held.state.records[0].lock_deadline_ms

    assert before + 4000 <= broker.call(deadline) <= after + 4000  # not the broker's 1000
    share_fetch(client, group, "m1", -1, topic_id)
    assert heartbeat(client, group, "m1", -1).error_code is ErrorCode.none


def test_a_closed_connection_releases_its_records_at_once(tmp_path: Path) -> None:
    """Kafka ends a share session with its connection and releases what it held; with a
    lock of a minute, only that release lets another consumer have them within the test."""
    with EmbeddedBroker(tmp_path, {"group.share.record.lock.duration.ms": "60000"}) as broker:
        topic, topic_id, group = new_queue(broker)
        with RawClient(broker.host, broker.port) as dying:
            joined(dying, group, "dying", topic, topic_id)
            produce(broker, topic, 3)
            assert acquired(share_fetch(dying, group, "dying", 0, topic_id, max_wait=2000)) == [
                (0, 2, 1)
            ]
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        consumer.subscribe([topic])
        try:
            assert received(consumer, 3) == [(0, 2), (1, 2), (2, 2)]
        finally:
            consumer.close()


def test_delete_groups_removes_an_empty_share_group_and_its_state(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    topic, topic_id, group = new_queue(broker)
    joined(client, group, "m1", topic, topic_id)
    produce(broker, topic, 2)
    assert acquired(share_fetch(client, group, "m1", 0, topic_id, max_wait=2000)) == [(0, 1, 1)]
    dg = schema(42, 2)

    def delete() -> ErrorCode:
        return client.request(dg.DeleteGroupsRequest(groups_names=(group,))).results[0].error_code

    assert delete() is ErrorCode.non_empty_group
    assert heartbeat(client, group, "m1", -1).error_code is ErrorCode.none
    assert delete() is ErrorCode.none
    assert delete() is ErrorCode.group_id_not_found
    states = broker.call(lambda: dict(broker.broker.share_groups.partitions.coordinator.states))
    assert not [key for key in states if key.group_id == group]
    written = [
        (record_type, key)
        for record_type, key in broker.call(share_state_keys, broker.broker)
        if key.group_id == group
    ]
    assert [record_type for record_type, _ in written[-2:]] == [SHARE_SNAPSHOT, SHARE_UPDATE]
    # A new member starts the group afresh, at the end of the log.
    joined(client, group, "m2", topic, topic_id)
    produce(broker, topic, 1)
    assert acquired(share_fetch(client, group, "m2", 0, topic_id, max_wait=2000)) == [(2, 2, 1)]


def describe_offsets(client: RawClient, group: str, topics: Any) -> Any:
    """DescribeShareGroupOffsets v1: (topic, partitions) pairs, or None for all."""
    m = schema(90, 1)
    requested = (
        None
        if topics is None
        else tuple(
            m.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p) for t, p in topics
        )
    )
    response = client.request(
        m.DescribeShareGroupOffsetsRequest(
            groups=(m.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=requested),)
        )
    )
    [described] = response.groups
    assert described.error_code is ErrorCode.none
    return [
        (
            t.topic_name,
            t.topic_id,
            [(p.partition_index, p.start_offset, p.lag) for p in t.partitions],
        )
        for t in described.topics
    ]


def alter_offsets(client: RawClient, group: str, topic: str, offsets: dict[int, int]) -> Any:
    m = schema(91, 0)
    partitions = tuple(
        m.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
        for p, o in offsets.items()
    )
    return client.request(
        m.AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=(m.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=partitions),),
        )
    )


def delete_offsets(client: RawClient, group: str, *topics: str) -> Any:
    m = schema(92, 0)
    return client.request(
        m.DeleteShareGroupOffsetsRequest(
            group_id=group,
            topics=tuple(m.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
        )
    )


def test_share_group_offsets_described_altered_and_deleted(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    topic, topic_id, group = new_queue(broker)
    joined(client, group, "m1", topic, topic_id)
    produce(broker, topic, 4)
    assert acquired(share_fetch(client, group, "m1", 0, topic_id, max_wait=2000)) == [(0, 3, 1)]
    assert share_ack(client, group, "m1", 1, topic_id, 0, 0).error_code is ErrorCode.none
    assert share_ack(client, group, "m1", 2, topic_id, 2, 2).error_code is ErrorCode.none
    share_fetch(client, group, "m1", -1, topic_id)  # 1 and 3 are released
    # Start offset 1; lag: end 4 - start 1 - the 1 record acknowledged above the start.
    assert describe_offsets(client, group, [(topic, (0, 1)), ("missing", (0,))]) == [
        (topic, topic_id, [(0, 1, 2), (1, -1, -1)]),
        ("missing", None, [(0, -1, -1)]),  # kio reads the zero uuid as None,
    ]
    assert describe_offsets(client, group, None) == [(topic, topic_id, [(0, 1, 2)])]
    # Alter and delete need an empty group.
    refused = alter_offsets(client, group, topic, {0: 0})
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.non_empty_group,
        "The group is not empty.",
    )
    assert delete_offsets(client, group, topic).error_code is ErrorCode.non_empty_group
    assert heartbeat(client, group, "m1", -1).error_code is ErrorCode.none
    altered = alter_offsets(client, group, topic, {0: 0, 3: 0})
    assert altered.error_code is ErrorCode.none
    assert [
        (p.partition_index, p.error_code, p.error_message) for p in altered.responses[0].partitions
    ] == [
        (0, ErrorCode.none, None),
        (
            3,
            ErrorCode.unknown_topic_or_partition,
            "This server does not host this topic-partition.",
        ),
    ]
    assert describe_offsets(client, group, None) == [(topic, topic_id, [(0, 0, 4)])]
    # Read again from the start, each record a first delivery.
    joined(client, group, "m2", topic, topic_id)
    assert acquired(share_fetch(client, group, "m2", 0, topic_id, max_wait=2000)) == [(0, 3, 1)]
    share_fetch(client, group, "m2", -1, topic_id)
    assert heartbeat(client, group, "m2", -1).error_code is ErrorCode.none
    deleted = delete_offsets(client, group, topic, "missing")
    assert deleted.error_code is ErrorCode.none
    assert [
        (t.topic_name, t.topic_id, t.error_code, t.error_message) for t in deleted.responses
    ] == [
        (topic, topic_id, ErrorCode.none, None),
        (
            "missing",
            None,
            ErrorCode.unknown_topic_or_partition,
            "This server does not host this topic-partition.",
        ),
    ]
    assert describe_offsets(client, group, None) == []
    again = delete_offsets(client, group, topic).responses[0]
    assert (again.error_code, again.error_message) == (
        ErrorCode.unknown_topic_or_partition,
        "There is no offset information to delete.",
    )
    unknown = delete_offsets(client, "no-such-group", topic)
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.group_id_not_found,
        "Group no-such-group not found.",
    )


def test_after_a_restart_a_share_group_with_state_is_empty_and_can_be_deleted(
    tmp_path: Path,
) -> None:
    small = {
        **BROKER,
        "offsets.topic.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "1",
    }
    with EmbeddedBroker(tmp_path, small) as first:
        topic, topic_id, group = new_queue(first)
        with RawClient(first.host, first.port) as raw:
            joined(raw, group, "m1", topic, topic_id)
    with EmbeddedBroker(tmp_path, small) as again, RawClient(again.host, again.port) as raw:
        assert describe_offsets(raw, group, None) == [(topic, topic_id, [(0, 0, 0)])]
        dg = schema(42, 2)
        deleted = raw.request(dg.DeleteGroupsRequest(groups_names=(group,)))
        assert deleted.results[0].error_code is ErrorCode.none
        assert describe_offsets(raw, group, None) == []


def test_a_share_partition_reset_under_its_leader_is_read_again(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    """Its state is started afresh (InitializeShareGroupState, as a group coordinator on
    another broker sends it for AlterShareGroupOffsets) while its leader holds records: the
    leader's next write is fenced (FENCED_STATE_EPOCH), and it reads the state again, as
    Kafka's leader drops a fenced SharePartition: the next fetch starts at the new offset."""
    topic, topic_id, group = new_queue(broker)
    joined(client, group, "m1", topic, topic_id)
    produce(broker, topic, 3)
    assert acquired(share_fetch(client, group, "m1", 0, topic_id, max_wait=2000)) == [(0, 2, 1)]
    key = SharePartitionKey(group, topic_id, 0)
    [topic_result] = client.request(initialize_request(key, 1)).results
    assert topic_result.partitions[0].error_code is ErrorCode.none
    acked = share_ack(client, group, "m1", 1, topic_id, 0, 2)
    assert acked.responses[0].partitions[0].error_code is ErrorCode.fenced_state_epoch
    assert acquired(share_fetch(client, group, "m1", 2, topic_id, max_wait=2000)) == [(1, 2, 1)]


def test_a_share_partition_whose_first_write_fails_is_not_kept(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    """Its start offset could not be persisted: the fetch gets the persister's error and the
    share-partition is not kept half-made (as Kafka drops a SharePartition whose
    initialization failed); the next fetch initializes it afresh and acquires."""
    topic, topic_id, group = new_queue(broker)
    joined(client, group, "m1", topic, topic_id)
    produce(broker, topic, 2)
    manager = broker.broker.share_groups.partitions  # type: ignore[union-attr]
    persister = manager.persister
    read, write = persister.read_state, persister.write_state

    async def not_there_once(*args: Any) -> tuple[ErrorCode, None]:
        persister.read_state = read  # (its group coordinator initialized it on assignment)
        return ErrorCode.none, None

    async def fails_once(*args: Any) -> ErrorCode:
        persister.write_state = write
        return ErrorCode.coordinator_not_available

    def patch() -> None:
        manager.held.pop(SharePartitionKey(group, topic_id, 0), None)
        persister.read_state, persister.write_state = not_there_once, fails_once

    broker.call(patch)
    first = share_fetch(client, group, "m1", 0, topic_id, max_wait=500)
    assert first.responses[0].partitions[0].error_code is ErrorCode.coordinator_not_available
    key = SharePartitionKey(group, topic_id, 0)
    assert broker.call(lambda: key in manager.held) is False
    assert acquired(share_fetch(client, group, "m1", 1, topic_id, max_wait=2000)) == [(0, 1, 1)]


def test_share_fetch_bytes_count_against_consumer_byte_rate(
    broker: EmbeddedBroker, client: RawClient
) -> None:
    topic, topic_id, group = new_queue(broker)
    throttled = "share-throttled"
    quota = 100.0  # B/s: a quota window (10 x 1 s at least) allows 1000 B
    assert _alter_quota(client, "client-id", throttled, "consumer_byte_rate", quota) is (
        ErrorCode.none
    )
    joined(client, group, "m1", topic, topic_id)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"x" * 1000)
    assert producer.flush(20) == 0
    m = schema(SHARE_FETCH, 2)
    request = m.ShareFetchRequest(
        group_id=group,
        member_id="m1",
        share_session_epoch=0,
        max_wait=ms(2000),
        min_bytes=1,
        max_bytes=1_000_000,
        max_records=100,
        batch_size=100,
        topics=(
            m.FetchTopic(
                topic_id=topic_id,
                partitions=(m.FetchPartition(partition_index=0, acknowledgement_batches=()),),
            ),
        ),
        forgotten_topics_data=(),
    )
    client.send(request, client_id=throttled)
    _, response = client.recv(response_class(SHARE_FETCH, 2))
    # capped at the window's 1000 B, the fetch still gets the one whole batch it acquired
    assert acquired(response) == [(0, 0, 1)]
    size = len(response.responses[0].partitions[0].records)
    # its first recording: the rate is size over 10 windows; (rate - quota) / quota * 10 s
    expected_ms = round((size / 10 - quota) / quota * 10_000)
    assert expected_ms > 0
    assert response.throttle_time == ms(expected_ms)


def _alter_quota(client: RawClient, kind: str, name: str, key: str, value: float) -> ErrorCode:
    entity = build(49, 1, "EntityData", entity_type=kind, entity_name=name)
    op = build(49, 1, "OpData", key=key, value=value, remove=False)
    entry = build(49, 1, "EntryData", entity=(entity,), ops=(op,))
    request = build(49, 1, "AlterClientQuotasRequest", entries=(entry,), validate_only=False)
    return client.request(request).entries[0].error_code
