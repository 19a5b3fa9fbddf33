"""DescribeClientQuotas and AlterClientQuotas, sans-IO on a real single-node Broker: Kafka's
validation messages, validate_only, the match types, persistence across a restart, and the
quota managers learning every change."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import (
    alter_client_quotas,
    create_partitions,
    create_topics,
    delete_topics,
    describe_client_quotas,
    fetch,
    metadata,
    produce,
)
from kafkalite.apis.base import ChannelThrottle, RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.broker.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    NOT_STORED,
    ClientQuotas,
)
from kafkalite.metrics.collector import BrokerCollector
from kafkalite.protocol.entities import make

from .conftest import open_broker
from .harness import call, record_batch, request_module, run_handler

Entity = Sequence[tuple[str, str | None]]


def alter(
    broker: Broker,
    *entries: tuple[Entity, Sequence[tuple[str, float | None]]],
    validate_only: bool = False,
    version: int = 1,
) -> list[tuple[dict[str, str | None], ErrorCode, str | None]]:
    def build(m: Any) -> Any:
        return make(
            m.AlterClientQuotasRequest,
            entries=tuple(
                make(
                    m.EntryData,
                    entity=tuple(
                        make(m.EntityData, entity_type=kind, entity_name=name)
                        for kind, name in entity
                    ),
                    ops=tuple(
                        make(m.OpData, key=key, value=value or 0.0, remove=value is None)
                        for key, value in ops
                    ),
                )
                for entity, ops in entries
            ),
            validate_only=validate_only,
        )

    response = call(broker, alter_client_quotas.API, version, build)
    return [
        (
            {e.entity_type: e.entity_name for e in entry.entity},
            entry.error_code,
            entry.error_message,
        )
        for entry in response.entries
    ]


def describe(
    broker: Broker, *components: tuple[str, int, str | None], strict: bool = False, version: int = 1
) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.DescribeClientQuotasRequest,
            components=tuple(
                make(m.ComponentData, entity_type=kind, match_type=match_type, match=match)
                for kind, match_type, match in components
            ),
            strict=strict,
        )

    return call(broker, describe_client_quotas.API, version, build)


def described(broker: Broker, *components: tuple[str, int, str | None], strict: bool = False):
    response = describe(broker, *components, strict=strict)
    assert response.error_code is ErrorCode.none, response.error_message
    return [
        (
            {e.entity_type: e.entity_name for e in entry.entity},
            {v.key: v.value for v in entry.values},
        )
        for entry in response.entries
    ]


ALICE = [("user", "alice")]
ALICE_APP = [("user", "alice"), ("client-id", "app")]
DEFAULT_USER = [("user", None)]
APP = [("client-id", "app")]


@pytest.mark.parametrize("version", [0, 1])
def test_set_describe_and_remove(broker: Broker, version: int) -> None:
    results = alter(
        broker,
        (ALICE, [("producer_byte_rate", 1024.0)]),
        (DEFAULT_USER, [("consumer_byte_rate", 2048.0)]),
        (ALICE_APP, [("producer_byte_rate", 512.0), ("consumer_byte_rate", 4096.0)]),
        version=version,
    )
    assert [error for _, error, _ in results] == [ErrorCode.none] * 3
    assert described(broker) == [
        (
            {"client-id": "app", "user": "alice"},
            {"consumer_byte_rate": 4096.0, "producer_byte_rate": 512.0},
        ),
        ({"user": None}, {"consumer_byte_rate": 2048.0}),
        ({"user": "alice"}, {"producer_byte_rate": 1024.0}),
    ]
    assert alter(broker, (ALICE, [("producer_byte_rate", None)]))[0][1] is ErrorCode.none
    assert {"user": "alice"} not in [entity for entity, _ in described(broker)]
    assert broker.quotas.produce.quota_limit(("alice", "app")) == 512.0
    assert broker.quotas.fetch.quota_limit(("bob", "")) == 2048.0


def test_match_types_and_strict(broker: Broker) -> None:
    alter(
        broker,
        (ALICE, [("producer_byte_rate", 1.0)]),
        (DEFAULT_USER, [("producer_byte_rate", 2.0)]),
        (ALICE_APP, [("producer_byte_rate", 3.0)]),
        (APP, [("producer_byte_rate", 4.0)]),
    )

    def entities(*components: tuple[str, int, str | None], strict: bool = False) -> list[Any]:
        return [entity for entity, _ in described(broker, *components, strict=strict)]

    assert entities(("user", MATCH_EXACT, "alice"), strict=True) == [{"user": "alice"}]
    assert entities(("user", MATCH_EXACT, "alice")) == [
        {"client-id": "app", "user": "alice"},
        {"user": "alice"},
    ]
    assert entities(("user", MATCH_DEFAULT, None)) == [{"user": None}]
    assert entities(("user", MATCH_SPECIFIED, None), strict=True) == [
        {"user": None},
        {"user": "alice"},
    ]
    assert entities(("client-id", MATCH_SPECIFIED, None)) == [
        {"client-id": "app"},
        {"client-id": "app", "user": "alice"},
    ]
    assert len(entities()) == 4
    assert entities(strict=True) == []


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([("", MATCH_EXACT, "x")], ErrorCode.invalid_request, "Invalid empty entity type."),
        (
            [("user", MATCH_EXACT, None)],
            ErrorCode.invalid_request,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [("user", MATCH_DEFAULT, "x")],
            ErrorCode.invalid_request,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [("user", MATCH_EXACT, "a"), ("user", MATCH_SPECIFIED, None)],
            ErrorCode.invalid_request,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            [("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)],
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        ),
        (
            [("group", MATCH_SPECIFIED, None)],
            ErrorCode.unsupported_version,
            "Unsupported entity type group",
        ),
        ([("user", 7, None)], ErrorCode.invalid_request, "Unknown match type 7"),
    ],
)
def test_describe_refusals(broker: Broker, components: Any, error: ErrorCode, message: str) -> None:
    response = describe(broker, *components)
    assert (response.error_code, response.error_message, response.entries) == (error, message, None)


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
        (
            [("group", "g")],
            [("producer_byte_rate", 1.0)],
            "Unhandled client quota entity type: group",
        ),
        (ALICE, [("retention.ms", 1.0)], "Invalid configuration key retention.ms"),
        (ALICE, [("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
        (ALICE, [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
        (
            [("ip", "127.0.0.1"), ("user", "a")],
            [("connection_creation_rate", 1.0)],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId",
        ),
    ],
)
def test_alter_refusals(broker: Broker, entity: Entity, ops: Any, message: str) -> None:
    [(_, error, text)] = alter(broker, (entity, ops))
    assert (error, text) == (ErrorCode.invalid_request, message)
    assert described(broker) == []


def test_ip_quotas(broker: Broker) -> None:
    results = alter(
        broker,
        ([("ip", "127.0.0.1")], [("connection_creation_rate", 5.0)]),
        ([("ip", None)], [("connection_creation_rate", 50.0)]),
        ([("ip", "::1")], [("producer_byte_rate", 5.0)]),
        ([("ip", "not-an-address")], [("connection_creation_rate", 5.0)]),
        ([("ip", "10.0.0.1")], [("connection_creation_rate", 1.5)]),
        (ALICE, [("connection_creation_rate", 5.0)]),
    )
    assert [(error, text) for _, error, text in results] == [
        (ErrorCode.none, None),
        (ErrorCode.none, None),
        (ErrorCode.invalid_request, "Invalid configuration key producer_byte_rate"),
        (ErrorCode.invalid_request, "not-an-address is not a valid IP or resolvable host."),
        (ErrorCode.invalid_request, "connection_creation_rate cannot be a fractional value."),
        (ErrorCode.invalid_request, "Invalid configuration key connection_creation_rate"),
    ]
    assert described(broker, ("ip", MATCH_SPECIFIED, None)) == [
        ({"ip": None}, {"connection_creation_rate": 50.0}),
        ({"ip": "127.0.0.1"}, {"connection_creation_rate": 5.0}),
    ]
    assert described(broker, ("ip", MATCH_EXACT, "127.0.0.1")) == [
        ({"ip": "127.0.0.1"}, {"connection_creation_rate": 5.0})
    ]
    assert broker.quotas.connections.enabled


def test_request_percentage_may_be_fractional(broker: Broker) -> None:
    [(_, error, _)] = alter(broker, (ALICE, [("request_percentage", 12.5)]))
    assert error is ErrorCode.none
    assert broker.quotas.request.quota_limit(("alice", "")) == 12.5


def test_duplicate_entity_and_key(broker: Broker) -> None:
    results = alter(
        broker,
        (ALICE, [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)]),
        (APP, [("producer_byte_rate", 1.0)]),
        (APP, [("producer_byte_rate", 2.0)]),
    )
    assert [
        (error, text is not None and text.startswith("Ignoring duplicate entity"))
        for _, error, text in results
    ] == [
        (ErrorCode.invalid_request, True),
        (ErrorCode.invalid_request, True),
    ]
    # as Kafka's controller, the first alteration of a repeated entity still applies
    assert described(broker) == [({"client-id": "app"}, {"producer_byte_rate": 1.0})]


def test_validate_only_changes_nothing(broker: Broker) -> None:
    [(_, error, _)] = alter(broker, (ALICE, [("producer_byte_rate", 1.0)]), validate_only=True)
    assert error is ErrorCode.none
    assert described(broker) == []
    assert not broker.quotas.produce.enabled


def test_quotas_survive_a_restart(tmp_path: Path, broker_factory: Callable[..., Broker]) -> None:
    first = open_broker(tmp_path / "node")
    alter(first, (DEFAULT_USER, [("producer_byte_rate", 100.0)]))
    first.shutdown()
    again = open_broker(tmp_path / "node")
    try:
        assert described(again) == [({"user": None}, {"producer_byte_rate": 100.0})]
        assert again.quotas.produce.enabled
        assert again.quotas.produce.quota_limit(("anyone", "")) == 100.0
    finally:
        again.shutdown()


# -- enforcement: Produce and Fetch ------------------------------------------------------------


def _handle(broker: Broker, api: Any, version: int, request: Any, size: int = 0) -> Any:
    channel = ChannelThrottle()
    ctx = RequestContext(
        broker, api.api_key, version, 7, "metered", request_size=size, channel=channel
    )
    return run_handler(api, ctx, request), channel.ms


def _produce(broker: Broker, topic: str, batch: bytes, size: int) -> tuple[Any, int]:
    m = request_module(0, 9)
    request = make(
        m.ProduceRequest,
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            make(
                m.TopicProduceData,
                name=topic,
                partition_data=(make(m.PartitionProduceData, index=0, records=batch),),
            ),
        ),
    )
    return _handle(broker, produce.API, 9, request, size)


def _fetch(broker: Broker, topic: str) -> tuple[Any, int]:
    m = request_module(1, 12)
    partition = make(
        m.FetchPartition,
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    request = make(
        m.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(make(m.FetchTopic, topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    return _handle(broker, fetch.API, 12, request)


def test_produce_over_the_quota_is_throttled(broker: Broker) -> None:
    broker.admin_manager.create_topic("metered", 1)
    alter(broker, ([("client-id", "metered")], [("producer_byte_rate", 1000.0)]))
    batch = record_batch([b"x" * 100])
    response, muted_ms = _produce(broker, "metered", batch, size=5_000)
    assert (response.throttle_time, muted_ms) == (datetime.timedelta(0), 0)  # 500 B/s
    response, muted_ms = _produce(broker, "metered", batch, size=10_000)
    # 15 KB over the 10 s the first samples span: (1500 - 1000) / 1000 * 10 s
    assert response.throttle_time == datetime.timedelta(milliseconds=muted_ms)
    assert 4_500 <= muted_ms <= 5_000  # (the window grows as time passes)
    assert response.responses[0].partition_responses[0].error_code is ErrorCode.none
    samples = {
        sample.name: (sample.labels, sample.value)
        for family in BrokerCollector(broker, "PLAINTEXT", {}).collect()
        if family.name.startswith("kafka_server_produce_")
        for sample in family.samples
    }
    labels = {"user": "", "client_id": "metered"}  # client-id quotas: one rate per client id
    assert samples["kafka_server_produce_throttle_time"] == (labels, muted_ms)
    assert samples["kafka_server_produce_byte_rate"][0] == labels


def test_throttled_fetch_answers_no_data(broker: Broker) -> None:
    broker.admin_manager.create_topic("metered", 1)
    batch = record_batch([b"y" * 4000])
    assert broker.replica_manager.append_records({("metered", 0): batch}, 1)[0]
    alter(broker, ([("user", None)], [("consumer_byte_rate", 100.0)]))
    # at most 100 B/s * 10 windows = 1000 bytes per fetch; Kafka returns the first batch
    # whole even so (KIP-74), which is over the quota
    response, muted_ms = _fetch(broker, "metered")
    assert muted_ms > 0
    assert response.throttle_time == datetime.timedelta(milliseconds=muted_ms)
    assert response.responses == ()
    # its bytes were taken back: with the quota raised, the same fetch is served
    alter(broker, ([("user", None)], [("consumer_byte_rate", 1e6)]))
    response, muted_ms = _fetch(broker, "metered")
    assert muted_ms == 0 and response.responses[0].partitions[0].records


# -- controller_mutation_rate: CreateTopics, CreatePartitions, DeleteTopics ------------------


def _create_topics(broker: Broker, version: int, *topics: tuple[str, int]) -> tuple[Any, int]:
    m = request_module(19, version)
    request = make(
        m.CreateTopicsRequest,
        topics=tuple(
            make(
                m.CreatableTopic,
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                assignments=(),
                configs=(),
            )
            for name, partitions in topics
        ),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    response, muted_ms = _handle(broker, create_topics.API, version, request)
    return {t.name: t.error_code for t in response.topics}, muted_ms


def test_strict_mutation_quota_refuses_once_the_bucket_is_empty(broker: Broker) -> None:
    # 1 partition a second: a burst of 11 (controller.quota.window.num * 1 s)
    alter(broker, ([("client-id", "metered")], [("controller_mutation_rate", 1.0)]))
    created, muted_ms = _create_topics(broker, 7, ("a", 10), ("b", 5), ("c", 1))
    # a takes 10 of 11 tokens, b finds 1 left and takes 5 (-4), c is refused
    assert created == {
        "a": ErrorCode.none,
        "b": ErrorCode.none,
        "c": ErrorCode.throttling_quota_exceeded,
    }
    assert 3_500 <= muted_ms <= 4_000  # 4 tokens owed at 1 a second
    assert "c" not in broker.metadata.topics

    # version 5 knows no THROTTLING_QUOTA_EXCEEDED: permissive, done and only throttled
    created, muted_ms = _create_topics(broker, 5, ("d", 1))
    assert created == {"d": ErrorCode.none} and muted_ms > 0

    m = request_module(37, 3)
    grow = make(
        m.CreatePartitionsRequest,
        topics=(make(m.CreatePartitionsTopic, name="a", count=12, assignments=None),),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    response, muted_ms = _handle(broker, create_partitions.API, 3, grow)
    assert response.results[0].error_code is ErrorCode.throttling_quota_exceeded
    assert muted_ms > 0

    m = request_module(20, 6)
    delete = make(
        m.DeleteTopicsRequest,
        topics=(make(m.DeleteTopicState, name="b", topic_id=None),),
        timeout=datetime.timedelta(seconds=5),
    )
    response, muted_ms = _handle(broker, delete_topics.API, 6, delete)
    assert response.responses[0].error_code is ErrorCode.throttling_quota_exceeded
    assert "b" in broker.metadata.topics and muted_ms > 0


def test_without_a_store_both_apis_say_quotas_are_not_stored(broker: Broker) -> None:
    broker.client_quotas = ClientQuotas(None)
    response = describe(broker)
    assert (response.error_code, response.error_message) == (
        ErrorCode.unsupported_version,
        NOT_STORED,
    )
    [(_, error, text)] = alter(broker, (ALICE, [("producer_byte_rate", 1.0)]))
    assert (error, text) == (ErrorCode.unsupported_version, NOT_STORED)


def test_auto_creation_takes_from_the_mutation_quota(broker: Broker) -> None:
    alter(broker, ([("client-id", "metered")], [("controller_mutation_rate", 1.0)]))
    m = request_module(3, 12)
    lookup = make(
        m.MetadataRequest,
        topics=(make(m.MetadataRequestTopic, name="auto", topic_id=None),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    response, muted_ms = _handle(broker, metadata.API, 12, lookup)
    assert response.topics[0].error_code is ErrorCode.none and muted_ms == 0
    # 11 tokens less the auto-created partition: 11 more take the bucket below 0
    created, _ = _create_topics(broker, 7, ("x", 11), ("y", 1))
    assert created == {"x": ErrorCode.none, "y": ErrorCode.throttling_quota_exceeded}
