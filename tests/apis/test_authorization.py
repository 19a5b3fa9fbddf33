"""ACL checks per API, handlers called directly as `User:alice` on a broker with an
authorizer: without ACLs each request gets Kafka's error (TOPIC_, GROUP_, CLUSTER_ or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and nothing else; with ACLs allowing everything the
same requests pass the checks. Metadata hides topics; authorized-operations bitfields
follow the ACLs."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis import (
    add_offsets_to_txn,
    alter_client_quotas,
    alter_user_scram_credentials,
    consumer_group_describe,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_client_quotas,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    txn_offset_commit,
    update_features,
)
from kafkalite.apis.base import ApiHandler, RequestContext
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
from kafkalite.security.principal import KafkaPrincipal
from kafkalite.storage.batch import TRANSACTIONAL_FLAG

from .harness import record_batch, request_module, roundtrip, run_handler

TOPIC, GROUP, TXN = "orders", "g", "tx"
ALICE = KafkaPrincipal("User", "alice")
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
DENIALS = {TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED}
SECOND = datetime.timedelta(seconds=1)
NO_WAIT = datetime.timedelta(0)


@pytest.fixture
def secured(broker_factory: Callable[..., Broker]) -> Iterator[Broker]:
    broker = broker_factory(
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "auto.create.topics.enable": "true",
        }
    )
    broker.admin_manager.create_topic(TOPIC, 1, 1)
    broker.admin_manager.create_topic("doomed", 1, 1)
    yield broker


def grant_all(broker: Broker) -> None:
    assert broker.authorizer is not None
    trio.run(
        broker.authorizer.create_acls,
        [
            AclBinding(
                ResourcePattern(kind, "*", PatternType.LITERAL),
                AccessControlEntry("User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW),
            )
            for kind in (
                ResourceType.TOPIC,
                ResourceType.GROUP,
                ResourceType.TRANSACTIONAL_ID,
                ResourceType.CLUSTER,
            )
        ],
    )


def call_as_alice(broker: Broker, api: ApiHandler, version: int, build: Any) -> Any:
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
    roundtrip(response)  # encodes (kio reads a zero topic id back as None)
    return response


def errors(entity: Any) -> set[ErrorCode]:
    """Every error code in a response, nested ones included, but NONE."""
    found: set[ErrorCode] = set()
    if isinstance(entity, tuple):
        for item in entity:
            found |= errors(item)
    elif is_dataclass(entity):
        for field in fields(entity):
            value = getattr(entity, field.name)
            if isinstance(value, ErrorCode):
                found.add(value)
            else:
                found |= errors(value)
    return found - {ErrorCode.none}


def produce_request(m: Any, transactional_id: str | None = None, attributes: int = 0) -> Any:
    records = record_batch([b"v"], attributes=attributes)
    data = make(m.PartitionProduceData, index=0, records=records)
    topic = make(m.TopicProduceData, name=TOPIC, partition_data=(data,))
    return make(
        m.ProduceRequest,
        transactional_id=transactional_id,
        acks=1,
        timeout=SECOND,
        topic_data=(topic,),
    )


def fetch_request(m: Any, replica_id: int = -1) -> Any:
    part = make(m.FetchPartition, partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    return make(
        m.FetchRequest,
        replica_id=replica_id,
        max_wait=NO_WAIT,
        min_bytes=0,
        topics=(make(m.FetchTopic, topic=TOPIC, partitions=(part,)),),
        forgotten_topics_data=(),
    )


def list_offsets_request(m: Any) -> Any:
    part = make(m.ListOffsetsPartition, partition_index=0, timestamp=-1)
    topic = make(m.ListOffsetsTopic, name=TOPIC, partitions=(part,))
    return make(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=(topic,))


def metadata_request(m: Any, *names: str) -> Any:
    topics = tuple(make(m.MetadataRequestTopic, topic_id=None, name=n) for n in names)
    return make(
        m.MetadataRequest,
        topics=topics,
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=True,
    )


def offset_commit_request(m: Any) -> Any:
    part = make(
        m.OffsetCommitRequestPartition,
        partition_index=0,
        committed_offset=1,
        committed_metadata=None,
    )
    topic = make(m.OffsetCommitRequestTopic, name=TOPIC, partitions=(part,))
    return make(m.OffsetCommitRequest, group_id=GROUP, member_id="", topics=(topic,))


def offset_fetch_request(m: Any) -> Any:
    topic = make(m.OffsetFetchRequestTopics, name=TOPIC, partition_indexes=(0,))
    group = make(m.OffsetFetchRequestGroup, group_id=GROUP, topics=(topic,))
    return make(m.OffsetFetchRequest, groups=(group,))


def join_request(m: Any) -> Any:
    protocol = make(m.JoinGroupRequestProtocol, name="range", metadata=b"")
    return make(
        m.JoinGroupRequest,
        group_id=GROUP,
        session_timeout=10 * SECOND,
        member_id="",
        protocol_type="consumer",
        protocols=(protocol,),
    )


def create_topics_request(m: Any) -> Any:
    topic = make(
        m.CreatableTopic,
        name="new-topic",
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    return make(m.CreateTopicsRequest, topics=(topic,))


def describe_configs_request(m: Any, resource_type: int, name: str) -> Any:
    resource = make(m.DescribeConfigsResource, resource_type=resource_type, resource_name=name)
    return make(m.DescribeConfigsRequest, resources=(resource,))


def delete_records_request(m: Any) -> Any:
    part = make(m.DeleteRecordsPartition, partition_index=0, offset=0)
    topic = make(m.DeleteRecordsTopic, name=TOPIC, partitions=(part,))
    return make(m.DeleteRecordsRequest, topics=(topic,), timeout=SECOND)


def scram_deletion_request(m: Any) -> Any:
    deletion = make(m.ScramCredentialDeletion, name="bob", mechanism=1)
    return make(m.AlterUserScramCredentialsRequest, deletions=(deletion,), upsertions=())


def txn_offset_commit_request(m: Any) -> Any:
    part = make(
        m.TxnOffsetCommitRequestPartition,
        partition_index=0,
        committed_offset=1,
        committed_metadata=None,
    )
    return make(
        m.TxnOffsetCommitRequest,
        transactional_id=TXN,
        group_id=GROUP,
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(make(m.TxnOffsetCommitRequestTopic, name=TOPIC, partitions=(part,)),),
    )


def offset_for_leader_epoch_request(m: Any, replica_id: int = -1) -> Any:
    part = make(m.OffsetForLeaderPartition, partition=0, leader_epoch=0)
    topic = make(m.OffsetForLeaderTopic, topic=TOPIC, partitions=(part,))
    return make(m.OffsetForLeaderEpochRequest, replica_id=replica_id, topics=(topic,))


def offset_delete_request(m: Any) -> Any:
    part = make(m.OffsetDeleteRequestPartition, partition_index=0)
    topic = make(m.OffsetDeleteRequestTopic, name=TOPIC, partitions=(part,))
    return make(m.OffsetDeleteRequest, group_id=GROUP, topics=(topic,))


# (API, version, request builder, the error alice gets without ACLs, checked with ACLs too)
CASES: dict[str, tuple[ApiHandler, int, Callable[[Any], Any], ErrorCode, bool]] = {
    "produce": (produce.API, 9, produce_request, TOPIC_DENIED, True),
    "produce-transactional": (
        produce.API,
        9,
        lambda m: produce_request(m, TXN),
        TXN_DENIED,
        False,
    ),
    "produce-transactional-batch-without-id": (
        produce.API,
        9,
        lambda m: produce_request(m, attributes=TRANSACTIONAL_FLAG),
        TXN_DENIED,
        False,
    ),
    "fetch": (fetch.API, 12, fetch_request, TOPIC_DENIED, True),
    "fetch-follower": (fetch.API, 12, lambda m: fetch_request(m, 1), TOPIC_DENIED, False),
    "list-offsets": (list_offsets.API, 7, list_offsets_request, TOPIC_DENIED, True),
    "metadata-named": (
        metadata.API,
        12,
        lambda m: metadata_request(m, TOPIC),
        TOPIC_DENIED,
        True,
    ),
    "metadata-auto-create": (
        metadata.API,
        12,
        lambda m: metadata_request(m, "auto-created"),
        TOPIC_DENIED,
        True,
    ),
    "offset-commit": (offset_commit.API, 8, offset_commit_request, GROUP_DENIED, False),
    "offset-fetch": (offset_fetch.API, 8, offset_fetch_request, GROUP_DENIED, False),
    "find-coordinator-group": (
        find_coordinator.API,
        4,
        lambda m: make(m.FindCoordinatorRequest, key_type=0, coordinator_keys=(GROUP,)),
        GROUP_DENIED,
        True,
    ),
    "find-coordinator-txn": (
        find_coordinator.API,
        4,
        lambda m: make(m.FindCoordinatorRequest, key_type=1, coordinator_keys=(TXN,)),
        TXN_DENIED,
        False,
    ),
    "join-group": (join_group.API, 9, join_request, GROUP_DENIED, False),
    "heartbeat": (
        heartbeat.API,
        4,
        lambda m: make(m.HeartbeatRequest, group_id=GROUP, generation_id=1, member_id="m"),
        GROUP_DENIED,
        False,
    ),
    "describe-groups": (
        describe_groups.API,
        5,
        lambda m: make(
            m.DescribeGroupsRequest, groups=(GROUP,), include_authorized_operations=True
        ),
        GROUP_DENIED,
        False,
    ),
    "delete-groups": (
        delete_groups.API,
        2,
        lambda m: make(m.DeleteGroupsRequest, groups_names=(GROUP,)),
        GROUP_DENIED,
        False,
    ),
    "create-topics": (create_topics.API, 7, create_topics_request, TOPIC_DENIED, True),
    "create-partitions": (
        create_partitions.API,
        3,
        lambda m: make(
            m.CreatePartitionsRequest,
            topics=(make(m.CreatePartitionsTopic, name=TOPIC, count=2, assignments=None),),
            timeout=SECOND,
            validate_only=True,
        ),
        TOPIC_DENIED,
        True,
    ),
    "delete-topics": (
        delete_topics.API,
        6,
        lambda m: make(
            m.DeleteTopicsRequest,
            topics=(make(m.DeleteTopicState, name="doomed", topic_id=None),),
            timeout=10 * SECOND,
        ),
        TOPIC_DENIED,
        True,
    ),
    "describe-configs-topic": (
        describe_configs.API,
        4,
        lambda m: describe_configs_request(m, 2, TOPIC),
        TOPIC_DENIED,
        True,
    ),
    "describe-configs-broker": (
        describe_configs.API,
        4,
        lambda m: describe_configs_request(m, 4, "0"),
        CLUSTER_DENIED,
        True,
    ),
    "init-producer-id-transactional": (
        init_producer_id.API,
        4,
        lambda m: make(m.InitProducerIdRequest, transactional_id=TXN, transaction_timeout=SECOND),
        TXN_DENIED,
        False,
    ),
    "init-producer-id-idempotent": (
        init_producer_id.API,
        4,
        lambda m: make(m.InitProducerIdRequest, transactional_id=None, transaction_timeout=SECOND),
        CLUSTER_DENIED,
        True,
    ),
    "end-txn": (
        end_txn.API,
        3,
        lambda m: make(
            m.EndTxnRequest, transactional_id=TXN, producer_id=1, producer_epoch=0, committed=True
        ),
        TXN_DENIED,
        False,
    ),
    "delete-records": (delete_records.API, 2, delete_records_request, TOPIC_DENIED, True),
    "describe-log-dirs": (
        describe_log_dirs.API,
        4,
        lambda m: make(m.DescribeLogDirsRequest, topics=None),
        CLUSTER_DENIED,
        True,
    ),
    "leave-group": (
        leave_group.API,
        5,
        lambda m: make(
            m.LeaveGroupRequest, group_id=GROUP, members=(make(m.MemberIdentity, member_id="m"),)
        ),
        GROUP_DENIED,
        False,
    ),
    "offset-delete": (offset_delete.API, 0, offset_delete_request, GROUP_DENIED, False),
    "consumer-group-describe": (
        consumer_group_describe.API,
        1,
        lambda m: make(
            m.ConsumerGroupDescribeRequest, group_ids=(GROUP,), include_authorized_operations=True
        ),
        GROUP_DENIED,
        False,
    ),
    "offset-for-leader-epoch": (
        offset_for_leader_epoch.API,
        4,
        offset_for_leader_epoch_request,
        TOPIC_DENIED,
        True,
    ),
    "offset-for-leader-epoch-follower": (
        offset_for_leader_epoch.API,
        4,
        lambda m: offset_for_leader_epoch_request(m, 1),
        TOPIC_DENIED,
        True,
    ),
    "describe-producers": (
        describe_producers.API,
        0,
        lambda m: make(
            m.DescribeProducersRequest,
            topics=(make(m.TopicRequest, name=TOPIC, partition_indexes=(0,)),),
        ),
        TOPIC_DENIED,
        True,
    ),
    "add-offsets-to-txn": (
        add_offsets_to_txn.API,
        4,
        lambda m: make(
            m.AddOffsetsToTxnRequest,
            transactional_id=TXN,
            producer_id=1,
            producer_epoch=0,
            group_id=GROUP,
        ),
        TXN_DENIED,
        False,
    ),
    "txn-offset-commit": (txn_offset_commit.API, 4, txn_offset_commit_request, TXN_DENIED, False),
    "describe-transactions": (
        describe_transactions.API,
        0,
        lambda m: make(m.DescribeTransactionsRequest, transactional_ids=(TXN,)),
        TXN_DENIED,
        False,
    ),
    "update-features": (
        update_features.API,
        2,
        lambda m: make(
            m.UpdateFeaturesRequest, timeout=SECOND, feature_updates=(), validate_only=True
        ),
        CLUSTER_DENIED,
        True,
    ),
    "list-partition-reassignments": (
        list_partition_reassignments.API,
        0,
        lambda m: make(m.ListPartitionReassignmentsRequest, timeout=SECOND, topics=None),
        CLUSTER_DENIED,
        False,
    ),
    "describe-scram-credentials": (
        describe_user_scram_credentials.API,
        0,
        lambda m: make(m.DescribeUserScramCredentialsRequest, users=None),
        CLUSTER_DENIED,
        True,
    ),
    "list-config-resources": (
        list_config_resources.API,
        1,
        lambda m: make(m.ListConfigResourcesRequest, resource_types=()),
        CLUSTER_DENIED,
        True,
    ),
    "alter-scram-credentials": (
        alter_user_scram_credentials.API,
        0,
        scram_deletion_request,
        CLUSTER_DENIED,
        True,
    ),
    "describe-client-quotas": (
        describe_client_quotas.API,
        1,
        lambda m: make(m.DescribeClientQuotasRequest, components=(), strict=False),
        CLUSTER_DENIED,
        True,
    ),
    "alter-client-quotas": (
        alter_client_quotas.API,
        1,
        lambda m: make(
            m.AlterClientQuotasRequest,
            entries=(
                make(
                    m.EntryData,
                    entity=(make(m.EntityData, entity_type="user", entity_name="alice"),),
                    ops=(make(m.OpData, key="producer_byte_rate", value=1e6, remove=False),),
                ),
            ),
            validate_only=True,
        ),
        CLUSTER_DENIED,
        True,
    ),
}


def test_denied_without_acls_allowed_with_them(secured: Broker) -> None:
    """One broker for every case (a broker per case would cost a second each)."""
    for case, (api, version, build, denied, _) in CASES.items():
        assert errors(call_as_alice(secured, api, version, build)) == {denied}, case
    grant_all(secured)
    for case, (api, version, build, _, check_allowed) in CASES.items():
        if check_allowed:
            assert errors(call_as_alice(secured, api, version, build)) & DENIALS == set(), case


def test_metadata_hides_topics_and_reports_operations(secured: Broker) -> None:
    def all_topics(m: Any) -> Any:
        return make(
            m.MetadataRequest,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=True,
        )

    assert call_as_alice(secured, metadata.API, 12, all_topics).topics == ()
    assert secured.authorizer is not None
    trio.run(
        secured.authorizer.create_acls,
        [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED),
                AccessControlEntry("User:*", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
        ],
    )
    (topic,) = call_as_alice(secured, metadata.API, 12, all_topics).topics
    read, describe = AclOperation.READ, AclOperation.DESCRIBE
    assert (topic.name, topic.topic_authorized_operations) == (
        TOPIC,
        (1 << read) | (1 << describe),
    )


def test_created_topic_configs_need_describe_configs(secured: Broker) -> None:
    assert secured.authorizer is not None
    trio.run(
        secured.authorizer.create_acls,
        [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, "new-", PatternType.PREFIXED),
                AccessControlEntry("User:alice", "*", AclOperation.CREATE, AclPermissionType.ALLOW),
            )
        ],
    )
    (created,) = call_as_alice(secured, create_topics.API, 7, create_topics_request).topics
    assert (created.error_code, created.topic_config_error_code, created.configs) == (
        ErrorCode.none,
        TOPIC_DENIED,
        (),
    )


def test_without_an_authorizer_nothing_is_checked(broker_factory: Callable[..., Broker]) -> None:
    broker = broker_factory()
    broker.admin_manager.create_topic(TOPIC, 1, 1)
    assert broker.authorizer is None
    assert errors(call_as_alice(broker, produce.API, 9, produce_request)) == set()
    by_id = call_as_alice(broker, metadata.API, 12, lambda m: metadata_request(m, TOPIC))
    assert by_id.topics[0].topic_id != uuid.UUID(int=0)
