"""Every API the broker advertises, against Kafka's "Operations and Resources on Protocols".

One SASL_PLAINTEXT (PLAIN) broker with ACLs. `denied` has no ACL at all; `granted` is given,
per row, exactly the ACLs Kafka's KafkaApis checks for that request (and loses them after).
Each row sends a raw kio request at a low version and asserts: denied -> exactly Kafka's
authorization error and no data; granted -> no authorization error. The rows are keyed by
API key and checked against the broker's own ApiVersions answer, so an API added without a
row fails here. VARIANTS are Kafka's other paths through the same APIs (alternative grants,
other resources, listings that filter); a row with several ACLs is also sent with all but
one of them (that one's error, no other). And on the SASL listener, no request but
ApiVersions and SaslHandshake is answered before authentication: the connection is closed.
Kafka's source of truth: core/src/main/scala/kafka/server/KafkaApis.scala and AuthHelper.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkalite.testing import EmbeddedBroker
from protocol_tests.batches import simple_batch
from protocol_tests.raw_client import RawClient, api_versions_request, request_class

USERS = {"admin": "admin-secret", "denied": "denied-secret", "granted": "granted-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    ' username="admin" password="admin-secret"'
    + "".join(f' user_{user}="{password}"' for user, password in USERS.items())
    + ";"
)
TOPIC, GROUP, TXN = "matrix", "matrix-group", "matrix-txn"
CONSUMER_GROUP, SHARE_GROUP = "matrix-consumer-group", "matrix-share-group"
SHARE_OFFSETS_GROUP = "matrix-share-offsets"  # kept empty: its offsets may be changed
STATE_GROUP = "matrix-share-state"  # its share-partition state is written and deleted
ABSENT_TOPIC, NEW_TOPIC, ABSENT_GROUP = "matrix-absent", "matrix-new", "matrix-absent-group"
OPEN_TXN, DOOMED_TOPIC = "matrix-open-txn", "matrix-doomed"
DESCRIBED_GROUP = "matrix-described-group"  # a consumer group with TOPIC assigned
ABSENT_TXN, AUTO_TOPICS = "matrix-absent-txn", "matrix-auto-"  # a new one each time
TRANSACTIONAL = 0x10  # the batch attribute
TXN_BATCH = simple_batch(
    producer_id=4242, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL
)
# Answered before authentication; SaslAuthenticate carries it, ApiVersions has no ACL.
NO_ACL_KEYS = {17: "SaslHandshake", 18: "ApiVersions", 36: "SaslAuthenticate"}

AUTHORIZATION_ERRORS = {
    ErrorCode.topic_authorization_failed,
    ErrorCode.group_authorization_failed,
    ErrorCode.cluster_authorization_failed,
    ErrorCode.transactional_id_authorization_failed,
}
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed

Op, Res = AclOperation, ResourceType


# -- kio requests with every field not given set to its type's zero --------------------------


def _zero(hint: Any, kafka_type: str | None) -> Any:
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) and type(None) in args:
        return None
    if typing.get_origin(hint) is tuple:
        return ()
    if kafka_type in ("string",):
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type and kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type == "float64":
        return 0.0
    return 0


def _value(hint: Any, value: Any) -> Any:
    """A dict becomes the nested entity the field holds; a list, the tuple."""
    if isinstance(hint, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if isinstance(value, list):
        (item,) = typing.get_args(hint)[:1]
        return tuple(_value(item, each) for each in value)
    if isinstance(value, dict):
        return _entity(hint, value)
    return value


def _entity(cls: type, values: dict[str, Any]) -> Any:
    """The entity with `values`; every field not given zero (or its kio default)."""
    unknown = set(values) - {field.name for field in dataclasses.fields(cls)}
    assert not unknown, f"{cls.__name__} v{cls.__version__} has no field {sorted(unknown)}"
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.name in values:
            kwargs[field.name] = _value(hints[field.name], values[field.name])
        elif field.default is dataclasses.MISSING:
            kwargs[field.name] = _zero(hints[field.name], field.metadata.get("kafka_type"))
    return cls(**kwargs)


def kio_request(api_key: int, version: int, **values: Any) -> Any:
    return _entity(request_class(api_key, version), values)


# -- the rows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    resource_type: ResourceType
    name: str
    operation: AclOperation
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True)
class Row:
    api_key: int
    version: int
    request: Callable[[Fixture], Any]
    grants: tuple[Grant, ...]  # what Kafka checks; granted gets exactly these
    denied: int | None  # the only error code denied sees; None: filtered (see `hidden`)
    hidden: Callable[[Any], bool] | None = None  # denied's answer shows nothing
    each_grant_checked: bool = True  # is each grant's refusal seen on its own?


@dataclass(frozen=True)
class Fixture:
    topic_id: uuid.UUID
    doomed_id: uuid.UUID = uuid.UUID(int=0)  # DOOMED_TOPIC's: deleted by one row


def topic(operation: AclOperation, name: str = TOPIC) -> Grant:
    return Grant(Res.TOPIC, name, operation)


def group(operation: AclOperation, name: str = GROUP) -> Grant:
    return Grant(Res.GROUP, name, operation)


def cluster(operation: AclOperation) -> Grant:
    return Grant(Res.CLUSTER, CLUSTER_NAME, operation)


def txn(operation: AclOperation, name: str = TXN) -> Grant:
    return Grant(Res.TRANSACTIONAL_ID, name, operation)


TIMEOUT = datetime.timedelta(seconds=10)
GROUP_CONFIG = 32  # ConfigResource.Type.GROUP (KIP-848)
COMMITTED_0 = [{"partition_index": 0, "committed_offset": 0}]


def _topic_partitions() -> list[dict[str, Any]]:
    return [{"name": TOPIC, "partition_indexes": [0]}]


ROWS = [
    Row(
        0,
        3,
        lambda f: kio_request(
            0,
            3,
            acks=-1,
            timeout=TIMEOUT,
            topic_data=[
                {"name": TOPIC, "partition_data": [{"index": 0, "records": simple_batch()}]}
            ],
        ),
        (topic(Op.WRITE),),
        TOPIC_DENIED,
    ),
    Row(
        1,
        4,
        lambda f: kio_request(
            1,
            4,
            replica_id=-1,
            max_bytes=1 << 20,
            topics=[
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        ),
        (topic(Op.READ),),
        TOPIC_DENIED,
    ),
    Row(
        2,
        1,
        lambda f: kio_request(
            2,
            1,
            replica_id=-1,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        ),
        (topic(Op.DESCRIBE),),
        TOPIC_DENIED,
    ),
    Row(
        3,
        4,
        lambda f: kio_request(3, 4, topics=[{"name": TOPIC}], allow_auto_topic_creation=False),
        (topic(Op.DESCRIBE),),
        TOPIC_DENIED,
    ),
    Row(
        8,
        2,
        lambda f: kio_request(
            8,
            2,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            topics=[{"name": TOPIC, "partitions": COMMITTED_0}],
        ),
        (group(Op.READ), topic(Op.READ)),
        GROUP_DENIED,
    ),
    Row(
        9,
        2,
        lambda f: kio_request(9, 2, group_id=GROUP, topics=_topic_partitions()),
        (group(Op.DESCRIBE), topic(Op.DESCRIBE)),
        GROUP_DENIED,
    ),
    Row(
        10,
        0,
        lambda f: kio_request(10, 0, key=GROUP),
        (group(Op.DESCRIBE),),
        GROUP_DENIED,
    ),
    Row(  # session timeout 1 ms: refused (INVALID_SESSION_TIMEOUT) after authorization
        11,
        0,
        lambda f: kio_request(
            11,
            0,
            group_id=GROUP,
            session_timeout=datetime.timedelta(milliseconds=1),
            protocol_type="consumer",
            protocols=[{"name": "range"}],
        ),
        (group(Op.READ),),
        GROUP_DENIED,
    ),
    Row(
        12,
        0,
        lambda f: kio_request(12, 0, group_id=GROUP, generation_id=1, member_id="m"),
        (group(Op.READ),),
        GROUP_DENIED,
    ),
    Row(
        13,
        0,
        lambda f: kio_request(13, 0, group_id=GROUP, member_id="m"),
        (group(Op.READ),),
        GROUP_DENIED,
    ),
    Row(
        14,
        0,
        lambda f: kio_request(14, 0, group_id=GROUP, generation_id=1, member_id="m"),
        (group(Op.READ),),
        GROUP_DENIED,
    ),
    Row(
        15,
        0,
        lambda f: kio_request(15, 0, groups=[GROUP]),
        (group(Op.DESCRIBE),),
        GROUP_DENIED,
    ),
    Row(
        16,
        0,
        lambda f: kio_request(16, 0),
        (group(Op.DESCRIBE),),
        None,
        hidden=lambda r: not r.groups,
    ),
    Row(
        19,
        2,
        lambda f: kio_request(
            19,
            2,
            topics=[{"name": NEW_TOPIC, "num_partitions": 1, "replication_factor": 1}],
            timeout=TIMEOUT,
            validate_only=True,
        ),
        (topic(Op.CREATE, NEW_TOPIC),),
        TOPIC_DENIED,
    ),
    Row(  # an absent topic: UNKNOWN_TOPIC_OR_PARTITION once authorized
        20,
        1,
        lambda f: kio_request(20, 1, topic_names=[ABSENT_TOPIC], timeout=TIMEOUT),
        (topic(Op.DELETE, ABSENT_TOPIC),),
        TOPIC_DENIED,
    ),
    Row(
        21,
        0,
        lambda f: kio_request(
            21,
            0,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}],
            timeout=TIMEOUT,
        ),
        (topic(Op.DELETE),),
        TOPIC_DENIED,
    ),
    Row(
        22,
        0,
        lambda f: kio_request(
            22, 0, transactional_id=TXN, transaction_timeout=datetime.timedelta(seconds=60)
        ),
        (txn(Op.WRITE),),
        TXN_DENIED,
    ),
    Row(
        23,
        2,
        lambda f: kio_request(
            23,
            2,
            topics=[
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "current_leader_epoch": -1}],
                }
            ],
        ),
        (topic(Op.DESCRIBE),),
        TOPIC_DENIED,
    ),
    Row(
        24,
        0,
        lambda f: kio_request(
            24,
            0,
            v3_and_below_transactional_id=TXN,
            v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
        ),
        (txn(Op.WRITE), topic(Op.WRITE)),
        TXN_DENIED,
    ),
    Row(
        25,
        0,
        lambda f: kio_request(25, 0, transactional_id=TXN, group_id=GROUP),
        (txn(Op.WRITE), group(Op.READ)),
        TXN_DENIED,
    ),
    Row(
        26,
        0,
        lambda f: kio_request(26, 0, transactional_id=TXN, committed=False),
        (txn(Op.WRITE),),
        TXN_DENIED,
    ),
    Row(  # a marker for a producer that never wrote: a no-op on the log
        27,
        1,
        lambda f: kio_request(
            27,
            1,
            markers=[{"producer_id": 4242, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        ),
        (cluster(Op.CLUSTER_ACTION),),
        CLUSTER_DENIED,
    ),
    Row(
        28,
        0,
        lambda f: kio_request(
            28,
            0,
            transactional_id=TXN,
            group_id=GROUP,
            topics=[{"name": TOPIC, "partitions": COMMITTED_0}],
        ),
        (txn(Op.WRITE), group(Op.READ), topic(Op.READ)),
        TXN_DENIED,
    ),
    Row(
        29,
        1,
        lambda f: kio_request(
            29,
            1,
            resource_type_filter=Res.ANY,
            resource_name_filter=None,
            pattern_type_filter=PatternType.ANY,
            principal_filter=None,
            host_filter=None,
            operation=Op.ANY,
            permission_type=AclPermissionType.ANY,
        ),
        (cluster(Op.DESCRIBE),),
        CLUSTER_DENIED,
    ),
    Row(
        30,
        1,
        lambda f: kio_request(30, 1, creations=[_acl("User:nobody", NOBODY_READS)]),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(
        31,
        1,
        lambda f: kio_request(31, 1, filters=[_acl_filter("User:nobody", NOBODY_READS)]),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(
        32,
        1,
        lambda f: kio_request(
            32,
            1,
            resources=[
                {"resource_type": Res.TOPIC, "resource_name": TOPIC, "configuration_keys": None}
            ],
        ),
        (topic(Op.DESCRIBE_CONFIGS),),
        TOPIC_DENIED,
    ),
    Row(
        33,
        0,
        lambda f: kio_request(
            33,
            0,
            resources=[
                {
                    "resource_type": Res.TOPIC,
                    "resource_name": TOPIC,
                    "configs": [{"name": "retention.ms", "value": "86400000"}],
                }
            ],
            validate_only=True,
        ),
        (topic(Op.ALTER_CONFIGS),),
        TOPIC_DENIED,
    ),
    Row(
        34,
        1,
        lambda f: kio_request(
            34, 1, dirs=[{"path": "/nonexistent", "topics": [{"name": TOPIC, "partitions": [0]}]}]
        ),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(  # v3: the first with a top-level error (v1-2 answer denied with no results)
        35,
        3,
        lambda f: kio_request(35, 3, topics=None),
        (cluster(Op.DESCRIBE),),
        CLUSTER_DENIED,
    ),
    Row(
        37,
        0,
        lambda f: kio_request(
            37,
            0,
            topics=[{"name": TOPIC, "count": 2, "assignments": None}],
            timeout=TIMEOUT,
            validate_only=True,
        ),
        (topic(Op.ALTER),),
        TOPIC_DENIED,
    ),
    Row(
        42,
        0,
        lambda f: kio_request(42, 0, groups_names=[ABSENT_GROUP]),
        (group(Op.DELETE, ABSENT_GROUP),),
        GROUP_DENIED,
    ),
    Row(
        43,
        0,
        lambda f: kio_request(
            43, 0, topic_partitions=[{"topic": TOPIC, "partitions": [0]}], timeout=TIMEOUT
        ),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(
        44,
        0,
        lambda f: kio_request(
            44,
            0,
            resources=[
                {
                    "resource_type": Res.TOPIC,
                    "resource_name": TOPIC,
                    "configs": [{"name": "retention.ms", "value": "86400000"}],
                }
            ],
            validate_only=True,
        ),
        (topic(Op.ALTER_CONFIGS),),
        TOPIC_DENIED,
    ),
    Row(
        45,
        0,
        lambda f: kio_request(
            45,
            0,
            timeout=TIMEOUT,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}],
        ),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(
        46,
        0,
        lambda f: kio_request(46, 0, timeout=TIMEOUT, topics=None),
        (cluster(Op.DESCRIBE),),
        CLUSTER_DENIED,
    ),
    Row(
        47,
        0,
        lambda f: kio_request(
            47,
            0,
            group_id=GROUP,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
        ),
        (group(Op.DELETE), topic(Op.READ)),
        GROUP_DENIED,
    ),
    Row(
        48,
        0,
        lambda f: kio_request(48, 0, components=[], strict=False),
        (cluster(Op.DESCRIBE_CONFIGS),),
        CLUSTER_DENIED,
    ),
    Row(
        49,
        0,
        lambda f: kio_request(
            49,
            0,
            entries=[
                {
                    "entity": [{"entity_type": "user", "entity_name": "nobody"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1024.0}],
                }
            ],
            validate_only=True,
        ),
        (cluster(Op.ALTER_CONFIGS),),
        CLUSTER_DENIED,
    ),
    Row(
        50,
        0,
        lambda f: kio_request(50, 0, users=None),
        (cluster(Op.DESCRIBE),),
        CLUSTER_DENIED,
    ),
    Row(  # deleting an absent credential: RESOURCE_NOT_FOUND once authorized
        51,
        0,
        lambda f: kio_request(51, 0, deletions=[{"name": "nobody", "mechanism": 1}]),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(
        57,
        1,
        lambda f: kio_request(
            57,
            1,
            timeout=TIMEOUT,
            feature_updates=[{"feature": "matrix.feature", "max_version_level": 1}],
            validate_only=True,
        ),
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    Row(  # Kafka checks nothing (only the KIP-430 bitfield depends on ACLs)
        60,
        0,
        lambda f: kio_request(60, 0),
        (),
        ErrorCode.none,
    ),
    Row(
        61,
        0,
        lambda f: kio_request(61, 0, topics=[{"name": TOPIC, "partition_indexes": [0]}]),
        (topic(Op.READ),),
        TOPIC_DENIED,
    ),
    Row(  # an absent id (kio cannot read the -1 start time of TXN, open with no transaction)
        65,
        0,
        lambda f: kio_request(65, 0, transactional_ids=[ABSENT_TXN]),
        (txn(Op.DESCRIBE, ABSENT_TXN),),
        TXN_DENIED,
    ),
    Row(
        66,
        0,
        lambda f: kio_request(66, 0),
        (txn(Op.DESCRIBE),),
        None,
        hidden=lambda r: not r.transaction_states,
    ),
    Row(
        68,
        0,
        lambda f: kio_request(
            68,
            0,
            group_id=CONSUMER_GROUP,
            member_id=str(uuid.uuid4()),
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=[TOPIC],
            topic_partitions=[],
        ),
        (group(Op.READ, CONSUMER_GROUP), topic(Op.DESCRIBE)),
        GROUP_DENIED,
    ),
    Row(
        69,
        0,
        lambda f: kio_request(69, 0, group_ids=[DESCRIBED_GROUP]),
        (group(Op.DESCRIBE, DESCRIBED_GROUP), topic(Op.DESCRIBE)),
        GROUP_DENIED,
    ),
    Row(
        74,
        0,
        lambda f: kio_request(74, 0),
        (cluster(Op.DESCRIBE_CONFIGS),),
        CLUSTER_DENIED,
    ),
    Row(
        75,
        0,
        lambda f: kio_request(75, 0, topics=[{"name": TOPIC}], response_partition_limit=10),
        (topic(Op.DESCRIBE),),
        TOPIC_DENIED,
    ),
    Row(
        76,
        1,
        lambda f: kio_request(
            76,
            1,
            group_id=SHARE_GROUP,
            member_id=str(uuid.uuid4()),
            subscribed_topic_names=[TOPIC],
        ),
        (group(Op.READ, SHARE_GROUP), topic(Op.DESCRIBE)),
        GROUP_DENIED,
    ),
    Row(
        77,
        1,
        lambda f: kio_request(77, 1, group_ids=[SHARE_GROUP]),
        (group(Op.DESCRIBE, SHARE_GROUP),),
        GROUP_DENIED,
    ),
    Row(
        78,
        1,
        lambda f: kio_request(
            78,
            1,
            group_id=SHARE_GROUP,
            member_id=str(uuid.uuid4()),
            max_bytes=1 << 20,
            topics=[{"topic_id": f.topic_id, "partitions": [{"partition_index": 0}]}],
        ),
        (group(Op.READ, SHARE_GROUP), topic(Op.READ)),
        GROUP_DENIED,
    ),
    Row(  # no share session: SHARE_SESSION_NOT_FOUND comes before the topics' check, as in Kafka
        79,
        1,
        lambda f: kio_request(
            79,
            1,
            group_id=SHARE_GROUP,
            member_id=str(uuid.uuid4()),
            share_session_epoch=1,
            topics=[{"topic_id": f.topic_id, "partitions": [{"partition_index": 0}]}],
        ),
        (group(Op.READ, SHARE_GROUP), topic(Op.READ)),
        GROUP_DENIED,
        each_grant_checked=False,
    ),
    Row(
        90,
        0,
        lambda f: kio_request(
            90,
            0,
            groups=[
                {
                    "group_id": SHARE_OFFSETS_GROUP,
                    "topics": [{"topic_name": TOPIC, "partitions": [0]}],
                }
            ],
        ),
        (group(Op.DESCRIBE, SHARE_OFFSETS_GROUP), topic(Op.DESCRIBE)),
        GROUP_DENIED,
    ),
    Row(
        91,
        0,
        lambda f: kio_request(
            91,
            0,
            group_id=SHARE_OFFSETS_GROUP,
            topics=[
                {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}
            ],
        ),
        (group(Op.READ, SHARE_OFFSETS_GROUP), topic(Op.READ)),
        GROUP_DENIED,
    ),
    Row(
        92,
        0,
        lambda f: kio_request(92, 0, group_id=SHARE_OFFSETS_GROUP, topics=[{"topic_name": TOPIC}]),
        (group(Op.DELETE, SHARE_OFFSETS_GROUP), topic(Op.READ)),
        GROUP_DENIED,
    ),
    # The share-state RPCs a share-partition leader sends a share coordinator (83-87):
    # CLUSTER_ACTION, as every inter-broker request.
    *(
        Row(
            key,
            0,
            lambda f, key=key: kio_request(
                key,
                0,
                group_id=STATE_GROUP,
                topics=[{"topic_id": f.topic_id, "partitions": [{"partition": 0}]}],
            ),
            (cluster(Op.CLUSTER_ACTION),),
            CLUSTER_DENIED,
        )
        for key in (83, 84, 85, 86, 87)
    ),
]
ROWS_BY_KEY = {row.api_key: row for row in ROWS}

# Kafka's other paths through the same APIs: listings that filter, the other resource a
# request can name, the alternative grant.
VARIANTS = {
    "Produce transactional": Row(
        0,
        3,
        lambda f: kio_request(
            0,
            3,
            transactional_id=TXN,
            acks=-1,
            timeout=TIMEOUT,
            topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": TXN_BATCH}]}],
        ),
        (txn(Op.WRITE), topic(Op.WRITE)),
        TXN_DENIED,
    ),
    "Metadata auto-creating a topic": Row(
        3,
        4,
        lambda f: kio_request(
            3,
            4,
            topics=[{"name": AUTO_TOPICS + uuid.uuid4().hex[:8]}],
            allow_auto_topic_creation=True,
        ),
        (
            Grant(Res.TOPIC, AUTO_TOPICS, Op.DESCRIBE, PatternType.PREFIXED),
            Grant(Res.TOPIC, AUTO_TOPICS, Op.CREATE, PatternType.PREFIXED),
        ),
        TOPIC_DENIED,
    ),
    "Metadata all topics, hidden": Row(
        3,
        1,
        lambda f: kio_request(3, 1, topics=None),
        (topic(Op.DESCRIBE),),
        None,
        hidden=lambda r: not r.topics,
    ),
    "Fetch as a follower, CLUSTER_ACTION": Row(
        1,
        4,
        lambda f: dataclasses.replace(ROWS_BY_KEY[1].request(f), replica_id=1),
        (cluster(Op.CLUSTER_ACTION),),
        TOPIC_DENIED,
    ),
    "OffsetForLeaderEpoch by CLUSTER_ACTION (KIP-320: or DESCRIBE on the topic)": Row(
        23,
        2,
        ROWS_BY_KEY[23].request,
        (cluster(Op.CLUSTER_ACTION),),
        TOPIC_DENIED,
    ),
    "ListGroups with DESCRIBE on the cluster": Row(
        16,
        0,
        lambda f: kio_request(16, 0),
        (cluster(Op.DESCRIBE),),
        None,
        hidden=lambda r: not r.groups,
    ),
    "OffsetFetch v8, per group": Row(
        9,
        8,
        lambda f: kio_request(
            9,
            8,
            groups=[{"group_id": GROUP, "topics": _topic_partitions()}],
        ),
        (group(Op.DESCRIBE), topic(Op.DESCRIBE)),
        GROUP_DENIED,
    ),
    "AddPartitionsToTxn v4, a broker's verification": Row(
        24,
        4,
        lambda f: kio_request(
            24,
            4,
            transactions=[
                {
                    "transactional_id": TXN,
                    "producer_id": 4242,
                    "verify_only": True,
                    "topics": [{"name": TOPIC, "partitions": [0]}],
                }
            ],
        ),
        (cluster(Op.CLUSTER_ACTION),),
        CLUSTER_DENIED,
    ),
    "AlterConfigs broker": Row(
        33,
        0,
        lambda f: kio_request(
            33,
            0,
            resources=[
                {
                    "resource_type": 4,
                    "resource_name": "0",
                    "configs": [{"name": "log.cleaner.threads", "value": "1"}],
                }
            ],
            validate_only=True,
        ),
        (cluster(Op.ALTER_CONFIGS),),
        CLUSTER_DENIED,
    ),
    "Metadata auto-creating, CREATE on the cluster": Row(
        3,
        4,
        lambda f: kio_request(
            3,
            4,
            topics=[{"name": AUTO_TOPICS + uuid.uuid4().hex[:8]}],
            allow_auto_topic_creation=True,
        ),
        (
            Grant(Res.TOPIC, AUTO_TOPICS, Op.DESCRIBE, PatternType.PREFIXED),
            cluster(Op.CREATE),
        ),
        TOPIC_DENIED,
        each_grant_checked=False,  # without CREATE: TOPIC_AUTHORIZATION_FAILED, as above
    ),
    "WriteTxnMarkers by ALTER on the cluster": Row(
        27,
        1,
        ROWS_BY_KEY[27].request,
        (cluster(Op.ALTER),),
        CLUSTER_DENIED,
    ),
    "DescribeConfigs group": Row(
        32,
        4,
        lambda f: kio_request(
            32,
            4,
            resources=[
                {"resource_type": GROUP_CONFIG, "resource_name": GROUP, "configuration_keys": None}
            ],
        ),
        (group(Op.DESCRIBE_CONFIGS),),
        GROUP_DENIED,
    ),
    "IncrementalAlterConfigs group": Row(
        44,
        0,
        lambda f: kio_request(
            44,
            0,
            resources=[
                {
                    "resource_type": GROUP_CONFIG,
                    "resource_name": GROUP,
                    "configs": [{"name": "consumer.session.timeout.ms", "value": "45000"}],
                }
            ],
            validate_only=True,
        ),
        (group(Op.ALTER_CONFIGS),),
        GROUP_DENIED,
    ),
    "Metadata by name, v12: no topic id in a refusal": Row(
        3,
        12,
        lambda f: kio_request(3, 12, topics=[{"name": TOPIC}], allow_auto_topic_creation=False),
        (topic(Op.DESCRIBE),),
        TOPIC_DENIED,
        hidden=lambda r: r.topics[0].topic_id in (None, uuid.UUID(int=0)),  # kio reads zero as None
    ),
    "Metadata by topic id: no name in a refusal": Row(
        3,
        12,
        lambda f: kio_request(3, 12, topics=[{"name": None, "topic_id": f.topic_id}]),
        (topic(Op.DESCRIBE),),
        TOPIC_DENIED,
        hidden=lambda r: r.topics[0].name is None,
    ),
    "DeleteTopics by topic id: no name in a refusal": Row(
        20,
        6,
        lambda f: kio_request(
            20, 6, topics=[{"name": None, "topic_id": f.doomed_id}], timeout=TIMEOUT
        ),
        (topic(Op.DELETE, DOOMED_TOPIC),),
        TOPIC_DENIED,
        hidden=lambda r: r.responses[0].name is None,
    ),
    "DescribeCluster's KIP-430 bitfield: 0 without DESCRIBE on the cluster": Row(
        60,
        0,
        lambda f: kio_request(60, 0, include_cluster_authorized_operations=True),
        (cluster(Op.DESCRIBE),),
        ErrorCode.none,
        hidden=lambda r: r.cluster_authorized_operations == 0,
    ),
    "FindCoordinator transactional id": Row(
        10,
        1,
        lambda f: kio_request(10, 1, key=TXN, key_type=1),
        (txn(Op.DESCRIBE),),
        TXN_DENIED,
    ),
    "CreateTopics by CREATE on the cluster": Row(
        19,
        2,
        ROWS_BY_KEY[19].request,
        (cluster(Op.CREATE),),
        TOPIC_DENIED,
    ),
    "InitProducerId idempotent, IDEMPOTENT_WRITE": Row(
        22,
        0,
        lambda f: kio_request(22, 0, transactional_id=None),
        (cluster(Op.IDEMPOTENT_WRITE),),
        CLUSTER_DENIED,
    ),
    "InitProducerId idempotent, WRITE on a topic (KIP-679)": Row(
        22,
        0,
        lambda f: kio_request(22, 0, transactional_id=None),
        (topic(Op.WRITE),),
        CLUSTER_DENIED,
    ),
    "DescribeConfigs broker": Row(
        32,
        1,
        lambda f: kio_request(
            32,
            1,
            resources=[{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
        ),
        (cluster(Op.DESCRIBE_CONFIGS),),
        CLUSTER_DENIED,
    ),
    "IncrementalAlterConfigs broker": Row(
        44,
        0,
        lambda f: kio_request(
            44,
            0,
            resources=[
                {
                    "resource_type": 4,
                    "resource_name": "0",
                    "configs": [{"name": "log.cleaner.threads", "value": "1"}],
                }
            ],
            validate_only=True,
        ),
        (cluster(Op.ALTER_CONFIGS),),
        CLUSTER_DENIED,
    ),
    "DescribeTopicPartitions listing, hidden": Row(
        75,
        0,
        lambda f: kio_request(75, 0, topics=[], response_partition_limit=10),
        (topic(Op.DESCRIBE),),
        None,
        hidden=lambda r: not r.topics,
    ),
}


def _acl(principal: str, g: Grant) -> dict[str, Any]:
    """An ACL creation."""
    return {
        "resource_type": g.resource_type,
        "resource_name": g.name,
        "resource_pattern_type": g.pattern_type,
        "principal": principal,
        "host": "*",
        "operation": g.operation,
        "permission_type": AclPermissionType.ALLOW,
    }


def _acl_filter(principal: str, g: Grant) -> dict[str, Any]:
    """The filter matching exactly that ACL."""
    return {
        "resource_type_filter": g.resource_type,
        "resource_name_filter": g.name,
        "pattern_type_filter": g.pattern_type,
        "principal_filter": principal,
        "host_filter": "*",
        "operation": g.operation,
        "permission_type": AclPermissionType.ALLOW,
    }


NOBODY_READS = Grant(Res.TOPIC, "matrix-acl", Op.READ)


# -- what an answer says ----------------------------------------------------------------------


def _walk(entity: Any) -> Iterator[tuple[str, Any]]:
    """Every (field name, value) of the answer, nested entities included."""
    if isinstance(entity, tuple):
        for item in entity:
            yield from _walk(item)
    elif dataclasses.is_dataclass(entity):
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            yield field.name, value
            yield from _walk(value)


def error_codes(response: Any) -> set[int]:
    return {int(v) for name, v in _walk(response) if name.endswith("error_code")}


# What a denied answer must not carry: records, configs, members, ACLs, credentials...
DATA_FIELDS = {
    "records",
    "configs",
    "members",
    "resources",
    "acls",
    "active_producers",
    "acquired_records",
    "results",
    "transaction_states",
    "groups",
}
# ...nor where the log is: the fixture's topic has one record, so its offsets are 1.
OFFSET_FIELDS = {"offset", "committed_offset", "high_watermark", "last_stable_offset", "end_offset"}


def data_returned(response: Any) -> list[tuple[str, Any]]:
    """Data fields of a denied answer that carry something (per-item errors aside)."""
    shown = []
    for name, value in _walk(response):
        if name in OFFSET_FIELDS and value > 0:
            shown.append((name, value))
        elif name in DATA_FIELDS and value and not _only_refusals(value):
            shown.append((name, value))
    return shown


def _only_refusals(items: Any) -> bool:
    """A list whose every item is an authorization refusal (per group, per resource)."""
    return isinstance(items, tuple) and all(
        dataclasses.is_dataclass(item) and error_codes(item) & AUTHORIZATION_ERRORS
        for item in items
    )


# -- the broker and its clients ---------------------------------------------------------------


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "connection.failed.authentication.delay.ms": "0",
        "num.partitions": "1",
        "group.consumer.session.timeout.ms": "600000",  # DESCRIBED_GROUP's member stays
    }
    with EmbeddedBroker(overrides=overrides) as broker:
        yield broker


def login(broker: EmbeddedBroker, user: str) -> RawClient:
    client = RawClient("127.0.0.1", broker.listener_ports["SASL_PLAINTEXT"])
    handshake = client.request(kio_request(17, 1, mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.none
    token = f"\0{user}\0{USERS[user]}".encode()
    assert client.request(kio_request(36, 0, auth_bytes=token)).error_code == ErrorCode.none
    return client


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> Iterator[RawClient]:
    with login(broker, "admin") as client:
        yield client


@pytest.fixture(scope="module")
def denied(broker: EmbeddedBroker) -> Iterator[RawClient]:
    with login(broker, "denied") as client:
        yield client


@pytest.fixture(scope="module")
def granted(broker: EmbeddedBroker) -> Iterator[RawClient]:
    with login(broker, "granted") as client:
        yield client


@pytest.fixture(scope="module")
def fixture(admin: RawClient) -> Fixture:
    """A topic with a record, a classic group with an offset, an initialized transactional
    id, an empty share group with a share-partition's state, a consumer group with TOPIC
    assigned to its member."""
    create = kio_request(
        19,
        7,
        topics=[
            {"name": name, "num_partitions": 1, "replication_factor": 1}
            for name in (TOPIC, DOOMED_TOPIC)
        ],
        timeout=TIMEOUT,
    )
    created = admin.request(create)
    assert error_codes(created) == {ErrorCode.none}
    produce = ROWS_BY_KEY[0].request
    assert error_codes(admin.request(produce(Fixture(uuid.UUID(int=0))))) == {ErrorCode.none}
    assert error_codes(admin.request(ROWS_BY_KEY[8].request(Fixture(uuid.UUID(int=0))))) == {0}
    init = kio_request(22, 0, transactional_id=TXN, transaction_timeout=TIMEOUT * 6)
    assert admin.request(init).error_code == ErrorCode.none
    alter = ROWS_BY_KEY[91].request(Fixture(uuid.UUID(int=0)))
    assert error_codes(admin.request(alter)) == {ErrorCode.none}  # an empty share group
    joined = admin.request(
        kio_request(
            68,
            0,
            group_id=DESCRIBED_GROUP,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=[TOPIC],
            topic_partitions=[],
        )
    )
    assert joined.error_code == ErrorCode.none  # a member for the module's life
    metadata = admin.request(kio_request(3, 12, topics=[{"name": TOPIC}]))
    return Fixture(metadata.topics[0].topic_id, created.topics[1].topic_id)


def advertised(client: RawClient) -> dict[int, tuple[int, int]]:
    versions = client.request(api_versions_request())
    return {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}


def grant(admin: RawClient, grants: tuple[Grant, ...], create: bool) -> None:
    if create:
        acls = [_acl("User:granted", g) for g in grants]
        response = admin.request(kio_request(30, 3, creations=acls))
    else:
        filters = [_acl_filter("User:granted", g) for g in grants]
        response = admin.request(kio_request(31, 3, filters=filters))
    assert error_codes(response) <= {ErrorCode.none}


# -- the tests ------------------------------------------------------------------------------


def test_every_advertised_api_has_a_row(admin: RawClient) -> None:
    missing = set(advertised(admin)) - set(ROWS_BY_KEY) - set(NO_ACL_KEYS)
    assert not missing, f"APIs without a row in the ACL matrix: {sorted(missing)}"


@pytest.mark.parametrize(
    "row",
    [*ROWS, *VARIANTS.values()],
    ids=[*(str(row.api_key) for row in ROWS), *VARIANTS],
)
def test_denied_then_granted(
    row: Row,
    admin: RawClient,
    denied: RawClient,
    granted: RawClient,
    fixture: Fixture,
) -> None:
    versions = advertised(admin)
    if row.api_key not in versions:
        pytest.skip(f"API key {row.api_key} is not advertised")
    assert versions[row.api_key][0] <= row.version <= versions[row.api_key][1]

    answer = denied.request(row.request(fixture))
    if row.denied is None:
        assert error_codes(answer) <= {ErrorCode.none}
    else:
        assert error_codes(answer) == {row.denied}
    assert not data_returned(answer), answer
    if row.hidden is not None:
        assert row.hidden(answer)

    grant(admin, row.grants, create=True)
    try:
        answer = granted.request(row.request(fixture))
    finally:
        grant(admin, row.grants, create=False)
    assert not error_codes(answer) & AUTHORIZATION_ERRORS, answer
    if row.hidden is not None:
        assert not row.hidden(answer)


def test_nothing_but_api_versions_and_handshake_before_authentication(
    broker: EmbeddedBroker, admin: RawClient, fixture: Fixture
) -> None:
    """Every other advertised API, sent first on the SASL listener: no answer, closed."""
    answered = []
    for api_key in sorted(set(advertised(admin)) - {17, 18}):
        row = ROWS_BY_KEY.get(api_key)
        request = row.request(fixture) if row else kio_request(36, 0, auth_bytes=b"\0x\0y")
        with RawClient("127.0.0.1", broker.listener_ports["SASL_PLAINTEXT"]) as client:
            client.send(request)
            if not client.is_closed_by_peer(timeout=10) or client._buffer:
                answered.append(api_key)
    assert answered == []


MULTI_GRANT = [
    (row, i)
    for row in (*ROWS, *VARIANTS.values())
    if len(row.grants) > 1 and row.each_grant_checked
    for i in range(len(row.grants))
]
DENIED_ERROR = {
    Res.TOPIC: TOPIC_DENIED,
    Res.GROUP: GROUP_DENIED,
    Res.CLUSTER: CLUSTER_DENIED,
    Res.TRANSACTIONAL_ID: TXN_DENIED,
}


@pytest.mark.parametrize(
    ("row", "missing"),
    MULTI_GRANT,
    ids=[
        f"{row.api_key}-without-{row.grants[i].operation.name}-{row.grants[i].resource_type.name}"
        for row, i in MULTI_GRANT
    ],
)
def test_each_grant_is_needed(
    row: Row, missing: int, admin: RawClient, granted: RawClient, fixture: Fixture
) -> None:
    """All of a row's ACLs but one: the error of that one's resource, and no other refusal."""
    if row.api_key not in advertised(admin):
        pytest.skip(f"API key {row.api_key} is not advertised")
    grants = row.grants[:missing] + row.grants[missing + 1 :]
    grant(admin, grants, create=True)
    try:
        answer = granted.request(row.request(fixture))
    finally:
        grant(admin, grants, create=False)
    expected = DENIED_ERROR[row.grants[missing].resource_type]
    assert error_codes(answer) & AUTHORIZATION_ERRORS == {expected}, answer


@pytest.fixture
def open_transaction(admin: RawClient, fixture: Fixture) -> Iterator[str]:
    """A transaction of OPEN_TXN with TOPIC's partition 0 in it, aborted after the test."""
    init = admin.request(
        kio_request(22, 0, transactional_id=OPEN_TXN, transaction_timeout=TIMEOUT * 6)
    )
    assert init.error_code == ErrorCode.none
    ids = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    added = kio_request(
        24,
        3,
        v3_and_below_transactional_id=OPEN_TXN,
        v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
    )
    assert error_codes(admin.request(added)) == {ErrorCode.none}
    yield OPEN_TXN
    aborted = admin.request(kio_request(26, 0, transactional_id=OPEN_TXN, committed=False, **ids))
    assert aborted.error_code == ErrorCode.none


def test_describe_transactions_shows_only_the_topics_the_principal_may_describe(
    admin: RawClient, granted: RawClient, open_transaction: str
) -> None:
    """KafkaApis: partitions of topics without DESCRIBE are left out of the state."""
    describe = kio_request(65, 0, transactional_ids=[open_transaction])
    only_txn = (txn(Op.DESCRIBE, open_transaction),)
    grant(admin, only_txn, create=True)
    try:
        (state,) = granted.request(describe).transaction_states
        assert (state.error_code, state.transaction_state, state.topics) == (0, "Ongoing", ())
        grant(admin, (topic(Op.DESCRIBE),), create=True)
        (state,) = granted.request(describe).transaction_states
        assert [(t.topic, t.partitions) for t in state.topics] == [(TOPIC, (0,))]
    finally:
        grant(admin, (*only_txn, topic(Op.DESCRIBE)), create=False)


def test_offset_fetch_of_all_topics_shows_only_describable_ones(
    admin: RawClient, granted: RawClient, fixture: Fixture
) -> None:
    commit = ROWS_BY_KEY[8].request(fixture)  # offset 0 (OffsetDelete's row may have run)
    assert error_codes(admin.request(commit)) == {ErrorCode.none}
    fetch_all = kio_request(9, 2, group_id=GROUP, topics=None)
    grant(admin, (group(Op.DESCRIBE),), create=True)
    try:
        answer = granted.request(fetch_all)
        assert (answer.error_code, answer.topics) == (ErrorCode.none, ())
        grant(admin, (topic(Op.DESCRIBE),), create=True)
        answer = granted.request(fetch_all)
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in answer.topics] == [
            (TOPIC, [0])
        ]
    finally:
        grant(admin, (group(Op.DESCRIBE), topic(Op.DESCRIBE)), create=False)


def test_consumer_group_describe_refuses_a_group_with_undescribable_topics(
    admin: RawClient, granted: RawClient, fixture: Fixture
) -> None:
    """KAFKA-18813: a group whose assignments name a topic the principal may not describe
    is TOPIC_AUTHORIZATION_FAILED, with no members; with DESCRIBE on the topic it is shown."""
    describe = kio_request(69, 0, group_ids=[DESCRIBED_GROUP])
    (group_described,) = admin.request(describe).groups
    assert [
        t.topic_name for t in group_described.members[0].target_assignment.topic_partitions
    ] == [TOPIC]
    grant(admin, (group(Op.DESCRIBE, DESCRIBED_GROUP),), create=True)
    try:
        (refused,) = granted.request(describe).groups
        assert (refused.error_code, refused.members) == (TOPIC_DENIED, ())
        grant(admin, (topic(Op.DESCRIBE),), create=True)
        (shown,) = granted.request(describe).groups
        assert (shown.error_code, len(shown.members)) == (ErrorCode.none, 1)
    finally:
        grant(admin, (group(Op.DESCRIBE, DESCRIBED_GROUP), topic(Op.DESCRIBE)), create=False)
