"""kafkalite.cluster.zk_data: Kafka's znode paths and JSON (sans-IO, no ZooKeeper needed).

The `KAFKA_WRITTEN` samples are znodes as Kafka 3.x's ZkData.scala writes them (Jackson, keys
in its hash-map order), so each side reads the other's."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.cluster import zk_data as zd

TOPIC_ID = uuid.UUID("c7b49739-6cc3-4f6f-8786-e3cd08d6e3c0")


def test_paths_match_kafka() -> None:
    assert zd.broker_path(3) == "/brokers/ids/3"
    assert zd.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert zd.config_path("topics", "orders") == "/config/topics/orders"
    assert zd.config_path("brokers", zd.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert zd.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zd.PERSISTENT_PATHS == (
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    )
    with pytest.raises(ValueError, match="unknown config entity type"):
        zd.config_path("streams", "g")
    assert zd.config_path("groups", "g") == "/config/groups/g"


def test_kafka_uuid_is_url_safe_base64_unpadded() -> None:
    assert zd.kafka_uuid(TOPIC_ID) == "x7SXOWzDT2-HhuPNCNbjwA"
    assert zd.parse_kafka_uuid("x7SXOWzDT2-HhuPNCNbjwA") == TOPIC_ID


def test_cluster_id_version_is_a_string_as_kafka_writes_it() -> None:
    assert zd.encode_cluster_id("Hk3rUtu5RCe_cPYa8IvqqQ") == (
        b'{"version":"1","id":"Hk3rUtu5RCe_cPYa8IvqqQ"}'
    )
    assert zd.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"


def test_broker_info_v5_encodes_kafka_fields() -> None:
    info = zd.BrokerInfo(
        broker_id=2,
        endpoints=(zd.Endpoint("PLAINTEXT", "10.0.0.2", 9092),),
        rack="rack-a",
        timestamp_ms=1_700_000_000_000,
    )
    assert json.loads(info.encode()) == {
        "version": 5,
        "host": "10.0.0.2",
        "port": 9092,
        "endpoints": ["PLAINTEXT://10.0.0.2:9092"],
        "jmx_port": -1,
        "timestamp": "1700000000000",
        "rack": "rack-a",
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "features": {},
    }
    assert zd.BrokerInfo.decode(2, info.encode()) == info
    assert info.path == "/brokers/ids/2"


def test_broker_info_without_plaintext_listener_has_no_host() -> None:
    info = zd.BrokerInfo(1, (zd.Endpoint("SECURE", "::1", 9093, "SSL"),))
    value = json.loads(info.encode())
    assert (value["host"], value["port"], value["endpoints"]) == (None, -1, ["SECURE://[::1]:9093"])
    assert "rack" not in value
    assert zd.BrokerInfo.decode(1, info.encode()) == info


KAFKA_WRITTEN_BROKER = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
    b'"INTERNAL":"SASL_PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-1:9092",'
    b'"INTERNAL://kafka-1:19092"],"jmx_port":9999,"port":9092,"host":"kafka-1",'
    b'"version":5,"rack":"eu-1a","timestamp":"1700000123456"}'
)


def test_broker_registration_written_by_kafka_decodes() -> None:
    info = zd.BrokerInfo.decode(1, KAFKA_WRITTEN_BROKER)
    assert info == zd.BrokerInfo(
        broker_id=1,
        endpoints=(
            zd.Endpoint("PLAINTEXT", "kafka-1", 9092, "PLAINTEXT"),
            zd.Endpoint("INTERNAL", "kafka-1", 19092, "SASL_PLAINTEXT"),
        ),
        rack="eu-1a",
        timestamp_ms=1_700_000_123_456,
        jmx_port=9999,
        version=5,
    )


def test_old_broker_registrations_decode() -> None:
    v1 = b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"5"}'
    assert zd.BrokerInfo.decode(0, v1).endpoints == (zd.Endpoint("PLAINTEXT", "h", 9092),)
    v2 = b'{"version":2,"host":"h","port":1,"jmx_port":-1,"endpoints":["SSL://h:2"]}'
    assert zd.BrokerInfo.decode(0, v2).endpoints == (zd.Endpoint("SSL", "h", 2, "SSL"),)
    with pytest.raises(zd.ZkDataError, match="not JSON"):
        zd.BrokerInfo.decode(0, b"{oops")
    with pytest.raises(zd.ZkDataError, match="no security protocol"):
        zd.BrokerInfo.decode(0, b'{"version":4,"jmx_port":-1,"endpoints":["X://h:1"]}')


def test_controller_znode_as_kafka_3_writes_it() -> None:
    info = zd.ControllerInfo(broker_id=1, timestamp_ms=1_700_000_000_001)
    assert info.encode() == (
        b'{"version":2,"brokerid":1,"timestamp":"1700000000001","kraftControllerEpoch":-1}'
    )
    assert zd.ControllerInfo.decode(info.encode()) == info
    # Kafka 2.x wrote version 1 without kraftControllerEpoch.
    old = zd.ControllerInfo.decode(b'{"version":1,"brokerid":4,"timestamp":"12"}')
    assert (old.broker_id, old.timestamp_ms, old.kraft_controller_epoch) == (4, 12, -1)
    assert zd.encode_controller_epoch(17) == b"17"
    assert zd.decode_controller_epoch(b"17") == 17
    with pytest.raises(zd.ZkDataError):
        zd.decode_controller_epoch(b"x")


def test_topic_assignment_encodes_kafka_version_3() -> None:
    assignment = zd.TopicAssignment(
        {
            1: zd.ReplicaAssignment((2, 3, 1), adding_replicas=(1,), removing_replicas=(4,)),
            0: zd.ReplicaAssignment((1, 2, 3)),
        },
        TOPIC_ID,
    )
    assert json.loads(assignment.encode()) == {
        "version": 3,
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {"1": [1]},
        "removing_replicas": {"1": [4]},
        "topic_id": "x7SXOWzDT2-HhuPNCNbjwA",
    }
    assert zd.TopicAssignment.decode("t", assignment.encode()) == assignment


def test_topic_written_by_kafka_decodes() -> None:
    data = (
        b'{"removing_replicas":{},"partitions":{"2":[3,1,2],"1":[2,3,1],"0":[1,2,3]},'
        b'"topic_id":"x7SXOWzDT2-HhuPNCNbjwA","adding_replicas":{},"version":3}'
    )
    decoded = zd.TopicAssignment.decode("t", data)
    assert decoded.topic_id == TOPIC_ID
    assert decoded.partitions == {
        0: zd.ReplicaAssignment((1, 2, 3)),
        1: zd.ReplicaAssignment((2, 3, 1)),
        2: zd.ReplicaAssignment((3, 1, 2)),
    }
    # Before topic ids (Kafka < 2.8): version 1, partitions only.
    legacy = zd.TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert legacy == zd.TopicAssignment({0: zd.ReplicaAssignment((1,))}, None)


def test_partition_state_as_kafka_writes_it() -> None:
    state = zd.PartitionState(leader=1, leader_epoch=4, isr=(1, 3), controller_epoch=2)
    assert state.encode() == (
        b'{"version":1,"leader":1,"leader_epoch":4,"controller_epoch":2,"isr":[1,3]}'
    )
    kafka = b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":4,"isr":[1,3]}'
    assert zd.PartitionState.decode(kafka) == state
    recovering = zd.PartitionState(-1, 5, (2,), 3, zd.LEADER_RECOVERING)
    assert json.loads(recovering.encode())["leader_recovery_state"] == 1
    assert zd.PartitionState.decode(recovering.encode()) == recovering
    with pytest.raises(zd.ZkDataError, match="no 'isr'"):
        zd.PartitionState.decode(b'{"leader":1,"leader_epoch":0,"controller_epoch":1}')


@given(
    leader=st.integers(-1, 2**31 - 1),
    epoch=st.integers(0, 2**31 - 1),
    isr=st.lists(st.integers(0, 2**31 - 1), max_size=5),
    controller_epoch=st.integers(0, 2**31 - 1),
)
def test_partition_state_round_trips(
    leader: int, epoch: int, isr: list[int], controller_epoch: int
) -> None:
    state = zd.PartitionState(leader, epoch, tuple(isr), controller_epoch)
    assert zd.PartitionState.decode(state.encode()) == state


def test_configs_and_change_notifications() -> None:
    assert zd.encode_config({"retention.ms": "1000"}) == (
        b'{"version":1,"config":{"retention.ms":"1000"}}'
    )
    assert zd.decode_config(b'{"version":1,"config":{"retention.ms":"1000"}}') == {
        "retention.ms": "1000"
    }
    assert zd.decode_config(b"") == {}
    assert zd.decode_config(b'{"version":1}') == {}
    assert zd.encode_config_change("topics", "orders") == (
        b'{"version":2,"entity_path":"topics/orders"}'
    )
    assert zd.decode_config_change(b'{"version":2,"entity_path":"brokers/<default>"}') == (
        "brokers",
        "<default>",
    )
    with pytest.raises(zd.ZkDataError, match="unsupported version"):
        zd.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"x"}')


def test_isr_change_and_reassignment_notifications() -> None:
    data = zd.encode_isr_change([("b", 1), ("a", 0), ("b", 1)])
    assert data == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":1}]}'
    )
    assert zd.decode_isr_change(data) == {("a", 0), ("b", 1)}
    reassignment = zd.encode_reassignment({("t", 0): [3, 1]})
    assert (
        reassignment == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}'
    )
    assert zd.decode_reassignment(reassignment) == {("t", 0): (3, 1)}


def test_producer_id_blocks_as_kafka_writes_them() -> None:
    first = zd.next_producer_id_block(None, broker_id=2)
    assert (first.first, first.last) == (0, 999)
    assert first.encode() == b'{"version":1,"broker":2,"block_start":"0","block_end":"999"}'
    second = zd.next_producer_id_block(zd.ProducerIdBlock.decode(first.encode()), broker_id=1)
    assert second == zd.ProducerIdBlock(1, 1000, 1000)
    # Kafka's bound: a block may start at Long.MAX_VALUE - 1000 at the latest.
    before_last = zd.ProducerIdBlock(0, zd.LONG_MAX - 2 * zd.PRODUCER_ID_BLOCK_SIZE)
    last = zd.next_producer_id_block(before_last, 0)
    assert (last.first, last.last) == (zd.LONG_MAX - 1000, zd.LONG_MAX - 1)
    with pytest.raises(zd.ZkDataError, match="exhausted"):
        zd.next_producer_id_block(last, 0)
