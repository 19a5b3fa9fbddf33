"""Admin APIs, sans-IO: each handler called on a real Broker, at its lowest and highest version.

Every response also goes through the wire codec and back (see conftest.call).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import (
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    incremental_alter_configs,
)
from kafkalite.apis.registry import HANDLERS
from kafkalite.broker.broker import Broker
from kafkalite.broker.dynamic_config import DYNAMIC
from kafkalite.broker.topic_config import (
    SOURCE_DEFAULT,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    TOPIC_CONFIGS,
)
from kafkalite.protocol.entities import make

from .harness import call, record_batch

TIMEOUT = datetime.timedelta(seconds=30)
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# -- request helpers ---------------------------------------------------------------------------


def new_topic(
    name: str,
    partitions: int = -1,
    replication: int = -1,
    configs: Mapping[str, str | None] | None = None,
    assignments: Sequence[Sequence[int]] | Mapping[int, Sequence[int]] = (),
) -> dict[str, Any]:
    if not isinstance(assignments, Mapping):
        assignments = dict(enumerate(assignments))
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication,
        "configs": dict(configs or {}),
        "assignments": dict(assignments),
    }


def create(
    broker: Broker,
    version: int,
    *topics: dict[str, Any],
    validate_only: bool = False,
    timeout: datetime.timedelta = TIMEOUT,
) -> Any:
    def build(m: Any) -> Any:
        entries = tuple(
            make(
                m.CreatableTopic,
                **{
                    **t,
                    "configs": tuple(
                        make(m.CreatableTopicConfig, name=k, value=v)
                        for k, v in t["configs"].items()
                    ),
                    "assignments": tuple(
                        make(m.CreatableReplicaAssignment, partition_index=i, broker_ids=tuple(ids))
                        for i, ids in t["assignments"].items()
                    ),
                },
            )
            for t in topics
        )
        return make(
            m.CreateTopicsRequest, topics=entries, timeout=timeout, validate_only=validate_only
        )

    return call(broker, create_topics.API, version, build)


def create_ok(broker: Broker, name: str, partitions: int = 1, **configs: str) -> None:
    topic = new_topic(name, partitions, configs=configs)
    [result] = create(broker, 7, topic).topics
    assert result.error_code == ErrorCode.none, result.error_message


def delete_by_name(
    broker: Broker, version: int, *names: str, timeout: datetime.timedelta = TIMEOUT
) -> Any:
    def build(m: Any) -> Any:
        if version >= 6:
            states = tuple(make(m.DeleteTopicState, name=n, topic_id=None) for n in names)
            return make(m.DeleteTopicsRequest, topics=states, timeout=timeout)
        return make(m.DeleteTopicsRequest, topic_names=names, timeout=timeout)

    return call(broker, delete_topics.API, version, build)


def delete_v6(broker: Broker, *states: tuple[str | None, uuid.UUID | None]) -> Any:
    def build(m: Any) -> Any:
        entries = tuple(make(m.DeleteTopicState, name=n, topic_id=i) for n, i in states)
        return make(m.DeleteTopicsRequest, topics=entries, timeout=TIMEOUT)

    return call(broker, delete_topics.API, 6, build)


def grow(
    broker: Broker,
    version: int,
    *topics: tuple[str, int, Sequence[Sequence[int]] | None],
    validate_only: bool = False,
    timeout: datetime.timedelta = TIMEOUT,
) -> Any:
    def build(m: Any) -> Any:
        entries = tuple(
            make(
                m.CreatePartitionsTopic,
                name=name,
                count=count,
                assignments=None
                if assignments is None
                else tuple(
                    make(m.CreatePartitionsAssignment, broker_ids=tuple(ids)) for ids in assignments
                ),
            )
            for name, count, assignments in topics
        )
        return make(
            m.CreatePartitionsRequest, topics=entries, timeout=timeout, validate_only=validate_only
        )

    return call(broker, create_partitions.API, version, build)


def describe(
    broker: Broker,
    version: int,
    *resources: tuple[int, str, Sequence[str] | None],
    synonyms: bool = False,
    documentation: bool = False,
) -> Any:
    def build(m: Any) -> Any:
        entries = tuple(
            make(
                m.DescribeConfigsResource,
                resource_type=rtype,
                resource_name=name,
                configuration_keys=None if keys is None else tuple(keys),
            )
            for rtype, name, keys in resources
        )
        return make(
            m.DescribeConfigsRequest,
            resources=entries,
            include_synonyms=synonyms,
            include_documentation=documentation,
        )

    return call(broker, describe_configs.API, version, build)


def describe_topic(broker: Broker, name: str, version: int = 4, **flags: bool) -> dict[str, Any]:
    [result] = describe(broker, version, (TOPIC, name, None), **flags).results
    assert result.error_code == ErrorCode.none
    return {entry.name: entry for entry in result.configs}


def alter(
    broker: Broker,
    version: int,
    *resources: tuple[int, str, Sequence[tuple[str, int, str | None]]],
    validate_only: bool = False,
) -> Any:
    def build(m: Any) -> Any:
        entries = tuple(
            make(
                m.AlterConfigsResource,
                resource_type=rtype,
                resource_name=name,
                configs=tuple(
                    make(m.AlterableConfig, name=k, config_operation=op, value=v)
                    for k, op, v in ops
                ),
            )
            for rtype, name, ops in resources
        )
        return make(
            m.IncrementalAlterConfigsRequest, resources=entries, validate_only=validate_only
        )

    return call(broker, incremental_alter_configs.API, version, build)


def alter_topic(
    broker: Broker,
    name: str,
    *ops: tuple[str, int, str | None],
    version: int = 1,
    validate_only: bool = False,
) -> Any:
    [response] = alter(broker, version, (TOPIC, name, ops), validate_only=validate_only).responses
    return response


def delete_records_request(broker: Broker, version: int, topic: str, *offsets: tuple[int, int]):
    def build(m: Any) -> Any:
        partitions = tuple(
            make(m.DeleteRecordsPartition, partition_index=i, offset=o) for i, o in offsets
        )
        entry = make(m.DeleteRecordsTopic, name=topic, partitions=partitions)
        return make(m.DeleteRecordsRequest, topics=(entry,), timeout=TIMEOUT)

    return call(broker, delete_records.API, version, build)


def describe_cluster_request(broker: Broker, version: int, **values: Any) -> Any:
    values.setdefault("include_cluster_authorized_operations", False)
    return call(
        broker,
        describe_cluster.API,
        version,
        lambda m: make(m.DescribeClusterRequest, **values),
    )


def produce(broker: Broker, topic: str, count: int, partition: int = 0) -> None:
    batch = record_batch([b"v%d" % i for i in range(count)])
    results, _ = broker.replica_manager.append_records({(topic, partition): batch}, 1)
    assert results[(topic, partition)].error is ErrorCode.none, results


# -- registry ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "low", "high"),
    [
        (19, 2, 7),
        (20, 1, 6),
        (21, 0, 2),
        (32, 1, 4),
        (33, 0, 2),
        (37, 0, 3),
        (44, 0, 1),
        (60, 0, 2),
    ],
)
def test_registry_advertises_admin_apis(key: int, low: int, high: int) -> None:
    handler = HANDLERS[key]
    assert (handler.min_version, handler.max_version) == (low, high)


# -- CreateTopics ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 5, 7])
def test_create_topic_with_defaults(broker: Broker, version: int) -> None:
    [result] = create(broker, version, new_topic("orders")).topics
    assert result.error_code == ErrorCode.none
    assert result.error_message is None
    topic = broker.replica_manager.topics["orders"]
    assert len(topic.partitions) == broker.config.int("num.partitions")
    if version >= 5:
        assert result.num_partitions == len(topic.partitions)
        assert result.replication_factor == 1
        assert [c.name for c in result.configs] == sorted(TOPIC_CONFIGS)
        assert {c.config_source for c in result.configs} == {SOURCE_DEFAULT}
        assert not any(c.read_only or c.is_sensitive for c in result.configs)
    if version >= 7:
        assert result.topic_id == topic.topic_id


def test_create_topic_uses_broker_defaults(broker_factory: Any) -> None:
    broker = broker_factory(**{"num.partitions": "4", "log.retention.ms": "60000"})
    [result] = create(broker, 7, new_topic("t", configs={"segment.bytes": "1048576"})).topics
    assert result.num_partitions == 4
    configs = {c.name: c for c in result.configs}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "60000",
        SOURCE_STATIC_BROKER,
    )
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (
        "1048576",
        SOURCE_TOPIC,
    )
    assert broker.replica_manager.topics["t"].metadata.configs == {"segment.bytes": "1048576"}


@pytest.mark.parametrize("version", [2, 7])
def test_create_topic_explicit_partitions_and_internal_name(broker: Broker, version: int) -> None:
    results = create(
        broker, version, new_topic("three", 3, 1), new_topic("__consumer_offsets", 2)
    ).topics
    assert [r.error_code for r in results] == [ErrorCode.none, ErrorCode.none]
    assert len(broker.replica_manager.topics["three"].partitions) == 3
    assert len(broker.replica_manager.topics["__consumer_offsets"].partitions) == 2


@pytest.mark.parametrize("version", [2, 7])
def test_create_topic_validate_only_creates_nothing(broker: Broker, version: int) -> None:
    topic = new_topic("dry", 5, configs={"cleanup.policy": "compact"})
    [result] = create(broker, version, topic, validate_only=True).topics
    assert result.error_code == ErrorCode.none
    assert "dry" not in broker.replica_manager.topics
    if version >= 5:
        assert result.num_partitions == 5
        assert result.replication_factor == 1
        policy = next(c for c in result.configs if c.name == "cleanup.policy")
        assert (policy.value, policy.config_source) == ("compact", SOURCE_TOPIC)
    if version >= 7:
        assert result.topic_id is None


@pytest.mark.parametrize(
    ("topic", "error", "message"),
    [
        (new_topic("bad name"), ErrorCode.invalid_topic_exception, "illegal"),
        (
            new_topic("x", 0),
            ErrorCode.invalid_partitions,
            "Number of partitions was set to an invalid non-positive value.",
        ),
        (new_topic("x", -2), ErrorCode.invalid_partitions, "non-positive"),
        (
            new_topic("x", 1, 0),
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ),
        (
            new_topic("x", 1, 3),
            ErrorCode.invalid_replication_factor,
            "Unable to replicate the partition 3 time(s)",
        ),
        (
            new_topic("x", configs={"retention.ms": "soon"}),
            ErrorCode.invalid_config,
            "retention.ms",
        ),
        (
            new_topic("x", configs={"no.such.config": "1"}),
            ErrorCode.invalid_config,
            "no.such.config",
        ),
        (
            new_topic("x", configs={"retention.ms": None, "segment.ms": None}),
            ErrorCode.invalid_config,
            "Null value not supported for topic configs: retention.ms,segment.ms",
        ),
        (
            new_topic("x", 2, assignments=[[0]]),
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            new_topic("x", -1, 1, assignments=[[0]]),
            ErrorCode.invalid_request,
            "but replication factor was not set to -1.",
        ),
        (
            new_topic("x", assignments=[[7]]),
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        (
            new_topic("x", assignments=[[0, 0]]),
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes the broker 0 more than once.",
        ),
        (
            new_topic("x", assignments=[[]]),
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            new_topic("x", assignments={0: [0], 2: [0]}),
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            new_topic("__cluster_metadata"),
            ErrorCode.invalid_request,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
    ],
)
@pytest.mark.parametrize("version", [2, 7])
def test_create_topic_refusals(
    broker: Broker, version: int, topic: dict[str, Any], error: ErrorCode, message: str
) -> None:
    [result] = create(broker, version, topic).topics
    assert result.error_code == error
    assert message in result.error_message
    assert topic["name"] not in broker.replica_manager.topics
    if version >= 5:
        assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, ())


@pytest.mark.parametrize("version", [2, 7])
def test_create_topic_manual_assignment(broker: Broker, version: int) -> None:
    [result] = create(broker, version, new_topic("manual", assignments=[[0], [0], [0]])).topics
    assert result.error_code == ErrorCode.none
    partitions = broker.replica_manager.topics["manual"].partitions
    assert [p.replicas for p in partitions.values()] == [[0], [0], [0]]
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)


@pytest.mark.parametrize("version", [2, 7])
def test_create_existing_and_duplicate_topics(broker: Broker, version: int) -> None:
    create_ok(broker, "exists")
    results = create(
        broker,
        version,
        new_topic("exists"),
        new_topic("twice"),
        new_topic("twice", 2),
        new_topic("fine"),
    ).topics
    by_name = {r.name: r for r in results}
    assert len(results) == 3  # one answer for the repeated name
    assert by_name["exists"].error_code == ErrorCode.topic_already_exists
    assert by_name["exists"].error_message == "Topic 'exists' already exists."
    assert by_name["twice"].error_code == ErrorCode.invalid_request
    assert by_name["twice"].error_message == "Duplicate topic name."
    assert by_name["fine"].error_code == ErrorCode.none
    assert "twice" not in broker.replica_manager.topics


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_with_expired_deadline(broker: Broker, version: int) -> None:
    results = create(
        broker, version, new_topic("late"), new_topic("bad name"), timeout=datetime.timedelta(0)
    ).topics
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("late", ErrorCode.request_timed_out, None),
        ("bad name", ErrorCode.request_timed_out, None),
    ]
    assert "late" not in broker.replica_manager.topics


# -- DeleteTopics ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 5, 6])
def test_delete_topics_by_name(broker: Broker, version: int) -> None:
    create_ok(broker, "doomed", 2)
    topic_id = broker.replica_manager.topics["doomed"].topic_id
    results = {r.name: r for r in delete_by_name(broker, version, "doomed", "ghost").responses}
    assert results["doomed"].error_code == ErrorCode.none
    assert results["ghost"].error_code == ErrorCode.unknown_topic_or_partition
    assert "doomed" not in broker.replica_manager.topics
    assert broker.replica_manager.partition("doomed", 0) is None
    if version >= 5:
        assert results["doomed"].error_message is None
        assert results["ghost"].error_message == "This server does not host this topic-partition."
    if version >= 6:
        assert results["doomed"].topic_id == topic_id
        assert results["ghost"].topic_id is None


def test_delete_topics_by_id_v6(broker: Broker) -> None:
    create_ok(broker, "by-id")
    create_ok(broker, "both")
    manager = broker.replica_manager
    by_id, both = manager.topics["by-id"].topic_id, manager.topics["both"].topic_id
    unknown = uuid.uuid4()
    results = delete_v6(
        broker,
        (None, by_id),
        (None, unknown),
        (None, None),
        ("both", both),
        ("dup", None),
        ("dup", None),
    ).responses
    answers = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in results}
    assert answers == {
        ("by-id", by_id): (ErrorCode.none, None),
        (None, unknown): (ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
        (None, None): (ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        ("both", both): (
            ErrorCode.invalid_request,
            "You may not specify both topic name and topic id.",
        ),
        ("dup", None): (ErrorCode.invalid_request, "Duplicate topic name."),
    }
    assert "by-id" not in manager.topics and "both" in manager.topics


def test_delete_topic_named_by_id_and_name_deletes_nothing(broker: Broker) -> None:
    create_ok(broker, "twice")
    topic_id = broker.replica_manager.topics["twice"].topic_id
    [result] = delete_v6(broker, (None, topic_id), ("twice", None)).responses
    assert result.error_code == ErrorCode.invalid_request
    assert "twice" in broker.replica_manager.topics


@pytest.mark.parametrize(
    ("version", "error"),
    [
        (1, ErrorCode.invalid_request),
        (3, ErrorCode.topic_deletion_disabled),
        (6, ErrorCode.topic_deletion_disabled),
    ],
)
def test_delete_topics_disabled(broker_factory: Any, version: int, error: ErrorCode) -> None:
    broker = broker_factory(**{"delete.topic.enable": "false"})
    create_ok(broker, "kept")
    [result] = delete_by_name(broker, version, "kept").responses
    assert (result.name, result.error_code) == ("kept", error)
    assert "kept" in broker.replica_manager.topics


@pytest.mark.parametrize("version", [1, 6])
def test_delete_topics_with_expired_deadline(broker: Broker, version: int) -> None:
    create_ok(broker, "kept")
    [result] = delete_by_name(broker, version, "kept", timeout=datetime.timedelta(0)).responses
    assert (result.name, result.error_code) == ("kept", ErrorCode.request_timed_out)
    assert "kept" in broker.replica_manager.topics


# -- CreatePartitions --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_grows_topic(broker: Broker, version: int) -> None:
    create_ok(broker, "grow")
    [result] = grow(broker, version, ("grow", 3, None)).results
    assert (result.error_code, result.error_message) == (ErrorCode.none, None)
    assert len(broker.replica_manager.topics["grow"].partitions) == 3
    assert broker.replica_manager.partition("grow", 2) is not None


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_with_assignments(broker: Broker, version: int) -> None:
    create_ok(broker, "grow")
    [result] = grow(broker, version, ("grow", 3, [[0], [0]])).results
    assert result.error_code == ErrorCode.none
    assert len(broker.replica_manager.topics["grow"].partitions) == 3


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_validate_only(broker: Broker, version: int) -> None:
    create_ok(broker, "grow")
    [result] = grow(broker, version, ("grow", 4, None), validate_only=True).results
    assert result.error_code == ErrorCode.none
    assert len(broker.replica_manager.topics["grow"].partitions) == 1


@pytest.mark.parametrize(
    ("request_topic", "error", "message"),
    [
        (("grow", 2, None), ErrorCode.invalid_partitions, "Topic already has 2 partition(s)."),
        (
            ("grow", 1, None),
            ErrorCode.invalid_partitions,
            "The topic grow currently has 2 partition(s); 1 would not be an increase.",
        ),
        (("ghost", 3, None), ErrorCode.unknown_topic_or_partition, None),
        (
            ("grow", 4, [[0]]),
            ErrorCode.invalid_replica_assignment,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            ("grow", 3, [[5]]),
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes broker 5, but no such broker is registered.",
        ),
        (("grow", 3, [[0, 0]]), ErrorCode.invalid_replica_assignment, "more than once."),
    ],
)
@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_refusals(
    broker: Broker, version: int, request_topic: Any, error: ErrorCode, message: str | None
) -> None:
    create_ok(broker, "grow", 2)
    [result] = grow(broker, version, request_topic).results
    assert result.error_code == error
    if message is None:
        assert result.error_message is None
    else:
        assert message in result.error_message
    assert len(broker.replica_manager.topics["grow"].partitions) == 2


def test_create_partitions_duplicate_names(broker: Broker) -> None:
    create_ok(broker, "grow")
    results = grow(broker, 3, ("grow", 2, None), ("grow", 3, None)).results
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.invalid_request, "Duplicate topic name.")
    ]
    assert len(broker.replica_manager.topics["grow"].partitions) == 1


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_with_expired_deadline(broker: Broker, version: int) -> None:
    create_ok(broker, "grow")
    [result] = grow(broker, version, ("grow", 2, None), timeout=datetime.timedelta(0)).results
    assert (result.error_code, result.error_message) == (ErrorCode.request_timed_out, None)
    assert len(broker.replica_manager.topics["grow"].partitions) == 1


# -- DescribeConfigs ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_topic_configs(broker: Broker, version: int) -> None:
    create_ok(broker, "described", **{"retention.ms": "1000"})
    configs = describe_topic(broker, "described", version)
    assert list(configs) == sorted(TOPIC_CONFIGS)
    retention, policy = configs["retention.ms"], configs["cleanup.policy"]
    assert (retention.value, retention.config_source) == ("1000", SOURCE_TOPIC)
    assert (policy.value, policy.config_source) == ("delete", SOURCE_DEFAULT)
    assert not any(c.read_only or c.is_sensitive or c.synonyms for c in configs.values())
    if version >= 3:
        assert retention.config_type == TOPIC_CONFIGS["retention.ms"].config_type
        assert policy.config_type == TOPIC_CONFIGS["cleanup.policy"].config_type
        assert retention.documentation is None


@pytest.mark.parametrize("version", [1, 4])
def test_describe_topic_synonyms(broker_factory: Any, version: int) -> None:
    broker = broker_factory(**{"log.segment.bytes": "2097152", "log.retention.hours": "1"})
    create_ok(broker, "syn", **{"segment.bytes": "1048576"})
    configs = describe_topic(broker, "syn", version, synonyms=True)
    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1048576", SOURCE_TOPIC)
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("segment.bytes", "1048576", SOURCE_TOPIC),
        ("log.segment.bytes", "2097152", SOURCE_STATIC_BROKER),
        ("log.segment.bytes", str(1024**3), SOURCE_DEFAULT),
    ]
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source) == ("3600000", SOURCE_STATIC_BROKER)
    assert [(s.name, s.source) for s in retention.synonyms][0] == (
        "log.retention.hours",
        SOURCE_STATIC_BROKER,
    )
    assert retention.synonyms[-1].source == SOURCE_DEFAULT
    policy = configs["cleanup.policy"]
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "delete", SOURCE_DEFAULT)
    ]


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_filters_and_errors(broker: Broker, version: int) -> None:
    create_ok(broker, "t")
    results = describe(
        broker,
        version,
        (TOPIC, "t", ["retention.ms", "no.such.key"]),
        (TOPIC, "ghost", None),
        (TOPIC, "bad name", None),
        (BROKER, "7", None),
        (BROKER, "zero", None),
        (8, "0", None),
    ).results
    filtered, ghost, bad, other_broker, not_int, logger = results
    assert [c.name for c in filtered.configs] == ["retention.ms"]
    assert (ghost.error_code, ghost.error_message, ghost.configs) == (
        ErrorCode.unknown_topic_or_partition,
        None,
        (),
    )
    assert bad.error_code == ErrorCode.invalid_topic_exception
    assert other_broker.error_code == ErrorCode.invalid_request
    assert other_broker.error_message == (
        "Unexpected broker id, expected 0 or empty string, but received 7"
    )
    assert not_int.error_message == "Broker id must be an integer, but it is: zero"
    assert logger.error_code == ErrorCode.invalid_request
    assert [r.resource_name for r in results] == ["t", "ghost", "bad name", "7", "zero", "0"]


@pytest.mark.parametrize("version", [1, 4])
def test_describe_broker_configs(broker_factory: Any, version: int) -> None:
    broker = broker_factory(**{"num.partitions": "3"})
    [result] = describe(
        broker, version, (BROKER, "0", None), synonyms=True, documentation=True
    ).results
    assert result.error_code == ErrorCode.none
    configs = {c.name: c for c in result.configs}
    # Every property is listed, one without a value as Kafka lists it: null, DEFAULT_CONFIG.
    assert (configs["node.id"].value, configs["node.id"].config_source) == (None, SOURCE_DEFAULT)
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == (
        "3",
        SOURCE_STATIC_BROKER,
    )
    assert configs["log.dirs"].config_source == SOURCE_STATIC_BROKER
    assert (configs["delete.topic.enable"].value, configs["delete.topic.enable"].config_source) == (
        "true",
        SOURCE_DEFAULT,
    )
    # Only what Kafka updates dynamically is writable (kafka-configs --entity-type brokers).
    assert {name for name, c in configs.items() if not c.read_only} == DYNAMIC & set(configs)
    assert [(s.value, s.source) for s in configs["num.partitions"].synonyms] == [
        ("3", SOURCE_STATIC_BROKER),
        ("1", SOURCE_DEFAULT),
    ]
    if version >= 3:
        assert configs["num.partitions"].config_type == 3  # INT
        assert configs["delete.topic.enable"].config_type == 1  # BOOLEAN
        assert configs["log.retention.bytes"].config_type == 5  # LONG
        assert configs["offsets.topic.replication.factor"].config_type == 4  # SHORT
        assert configs["listeners"].config_type == 2  # STRING
        assert configs["num.partitions"].documentation


def test_describe_cluster_default_broker_resource_is_empty(broker: Broker) -> None:
    [result] = describe(broker, 4, (BROKER, "", None)).results
    assert (result.error_code, result.configs) == (ErrorCode.none, ())


# -- IncrementalAlterConfigs -------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_alter_set_and_delete(broker: Broker, version: int) -> None:
    create_ok(broker, "t", 2)
    response = alter_topic(
        broker,
        "t",
        ("retention.ms", SET, "5000"),
        ("max.message.bytes", SET, "2048"),
        version=version,
    )
    assert (response.error_code, response.error_message) == (ErrorCode.none, None)
    assert (response.resource_type, response.resource_name) == (TOPIC, "t")
    topic = broker.replica_manager.topics["t"]
    assert topic.metadata.configs == {"retention.ms": "5000", "max.message.bytes": "2048"}
    for partition in topic.partitions.values():  # the logs run with the new settings
        assert partition.log.config.retention_ms == 5000
        assert partition.log.config.max_message_bytes == 2048
    assert describe_topic(broker, "t")["retention.ms"].config_source == SOURCE_TOPIC

    response = alter_topic(broker, "t", ("retention.ms", DELETE, None), version=version)
    assert response.error_code == ErrorCode.none
    assert topic.metadata.configs == {"max.message.bytes": "2048"}
    assert describe_topic(broker, "t")["retention.ms"].config_source == SOURCE_DEFAULT


@pytest.mark.parametrize("version", [0, 1])
def test_alter_append_and_subtract(broker: Broker, version: int) -> None:
    create_ok(broker, "t")
    response = alter_topic(broker, "t", ("cleanup.policy", APPEND, "compact"), version=version)
    assert response.error_code == ErrorCode.none
    assert describe_topic(broker, "t")["cleanup.policy"].value == "delete,compact"
    response = alter_topic(broker, "t", ("cleanup.policy", SUBTRACT, "delete"), version=version)
    assert response.error_code == ErrorCode.none
    assert broker.replica_manager.topics["t"].metadata.configs == {"cleanup.policy": "compact"}
    # Kafka 4.1+ (KIP-1161): an empty policy is valid, the log is kept forever.
    response = alter_topic(broker, "t", ("cleanup.policy", SUBTRACT, "compact"), version=version)
    assert response.error_code == ErrorCode.none
    assert describe_topic(broker, "t")["cleanup.policy"].value == ""


@pytest.mark.parametrize(
    ("ops", "error", "message"),
    [
        (
            [("retention.ms", APPEND, "1")],
            ErrorCode.invalid_config,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        ([("retention.ms", SET, "soon")], ErrorCode.invalid_config, "retention.ms"),
        ([("no.such.config", SET, "1")], ErrorCode.invalid_config, "no.such.config"),
        ([("cleanup.policy", SET, "sideways")], ErrorCode.invalid_config, "cleanup.policy"),
        (
            [("retention.ms", SET, "1"), ("retention.ms", SET, "2")],
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        ),
        (
            [("retention.ms", SET, None)],
            ErrorCode.invalid_request,
            "Null value not supported for : retention.ms",
        ),
        ([("retention.ms", 9, "1")], ErrorCode.invalid_request, "Unknown operations type 9"),
    ],
)
@pytest.mark.parametrize("version", [0, 1])
def test_alter_refusals(
    broker: Broker, version: int, ops: Any, error: ErrorCode, message: str
) -> None:
    create_ok(broker, "t")
    response = alter_topic(broker, "t", *ops, version=version)
    assert response.error_code == error
    assert message in response.error_message
    assert broker.replica_manager.topics["t"].metadata.configs == {}


@pytest.mark.parametrize("version", [0, 1])
def test_alter_validate_only(broker: Broker, version: int) -> None:
    create_ok(broker, "t")
    response = alter_topic(
        broker, "t", ("retention.ms", SET, "5000"), version=version, validate_only=True
    )
    assert response.error_code == ErrorCode.none
    assert broker.replica_manager.topics["t"].metadata.configs == {}


@pytest.mark.parametrize("version", [0, 1])
def test_alter_resources_errors(broker: Broker, version: int) -> None:
    create_ok(broker, "t")
    responses = alter(
        broker,
        version,
        (TOPIC, "ghost", [("retention.ms", SET, "1")]),
        (BROKER, "0", [("log.dirs", SET, "/elsewhere")]),
        (BROKER, "", [("log.retention.ms", SET, "soon")]),
        (BROKER, "3", [("log.retention.ms", SET, "1")]),
        (TOPIC, "t", [("retention.ms", SET, "1")]),
        (TOPIC, "t", [("retention.ms", SET, "2")]),
        (TOPIC, "", []),
    ).responses
    ghost, broker_0, cluster, broker_3, dup_a, dup_b, default_topic = responses
    assert (ghost.error_code, ghost.error_message) == (
        ErrorCode.unknown_topic_or_partition,
        "The topic 'ghost' does not exist.",
    )
    assert (broker_0.error_code, broker_0.error_message) == (
        ErrorCode.invalid_request,
        "Cannot update these configs dynamically: [log.dirs]",
    )
    assert cluster.error_code == ErrorCode.invalid_request
    assert "Invalid value soon for configuration log.retention.ms" in cluster.error_message
    assert broker_3.error_message == "Unexpected broker id, expected 0, but received 3"
    for dup in (dup_a, dup_b):
        assert (dup.error_code, dup.error_message) == (
            ErrorCode.invalid_request,
            "Each resource must appear at most once.",
        )
    assert default_topic.error_message == "Default topic resources are not allowed."
    assert broker.replica_manager.topics["t"].metadata.configs == {}


# -- DeleteRecords -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2])
def test_delete_records(broker: Broker, version: int) -> None:
    create_ok(broker, "log", 2)
    produce(broker, "log", 5, partition=0)
    produce(broker, "log", 3, partition=1)
    [topic] = delete_records_request(broker, version, "log", (0, 2), (1, -1), (7, 0)).topics
    p0, p1, p7 = topic.partitions
    assert (p0.partition_index, p0.error_code, p0.low_watermark) == (0, ErrorCode.none, 2)
    assert (p1.error_code, p1.low_watermark) == (ErrorCode.none, 3)
    assert (p7.error_code, p7.low_watermark) == (ErrorCode.unknown_topic_or_partition, -1)
    assert broker.replica_manager.partition("log", 0).log_start_offset == 2


@pytest.mark.parametrize("version", [0, 2])
def test_delete_records_refusals(broker: Broker, version: int) -> None:
    create_ok(broker, "log")
    create_ok(broker, "__consumer_offsets")
    produce(broker, "log", 2)
    [topic] = delete_records_request(broker, version, "log", (0, 3)).topics
    assert (topic.partitions[0].error_code, topic.partitions[0].low_watermark) == (
        ErrorCode.offset_out_of_range,
        -1,
    )
    [ghost] = delete_records_request(broker, version, "ghost", (0, 0)).topics
    assert ghost.partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    [internal] = delete_records_request(broker, version, "__consumer_offsets", (0, 0)).topics
    assert internal.partitions[0].error_code == ErrorCode.invalid_topic_exception


# -- DescribeCluster ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(broker: Broker, version: int) -> None:
    response = describe_cluster_request(broker, version)
    assert response.error_code == ErrorCode.none
    assert response.cluster_id == broker.cluster_id
    assert response.controller_id == broker.node_id
    [node] = response.brokers
    listener = broker.advertised_listener
    assert (node.broker_id, node.host, node.port, node.rack) == (
        broker.node_id,
        listener.host,
        listener.port,
        None,
    )
    assert response.cluster_authorized_operations == -(2**31)
    if version >= 1:
        assert response.endpoint_type == 1


def test_describe_cluster_authorized_operations(broker: Broker) -> None:
    response = describe_cluster_request(broker, 1, include_cluster_authorized_operations=True)
    assert response.cluster_authorized_operations == 8096  # every cluster operation


@pytest.mark.parametrize(
    ("endpoint", "error", "message"),
    [
        (
            2,
            ErrorCode.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            "type CONTROLLER",
        ),
        (9, ErrorCode.unsupported_endpoint_type, "Unsupported endpoint type 9"),
    ],
)
def test_describe_cluster_endpoint_types(
    broker: Broker, endpoint: int, error: ErrorCode, message: str
) -> None:
    response = describe_cluster_request(broker, 1, endpoint_type=endpoint)
    assert (response.error_code, response.error_message) == (error, message)
    assert response.brokers == ()
