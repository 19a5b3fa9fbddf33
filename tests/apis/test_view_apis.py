"""Views (issue 18), sans-IO: created, described, listed, refused and deleted through the
admin handlers on a real Broker; produce refused with a message."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis import (
    add_partitions_to_txn,
    init_producer_id,
    metadata,
    offset_for_leader_epoch,
    produce,
)
from kafkalite.apis.base import RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.broker.delayed import FetchInfo, FetchParams
from kafkalite.broker.views import VIEW_FILTER, VIEW_SOURCE
from kafkalite.metrics.collector import BrokerCollector
from kafkalite.protocol.entities import make
from kafkalite.storage.records import Record, decode_records, encode_batch, encode_record_batch

from .harness import call, request_module
from .test_admin_apis import (
    SET,
    TOPIC,
    alter_topic,
    create,
    create_ok,
    delete_by_name,
    describe,
    grow,
    new_topic,
)

EU = "region = 'eu'"


def view_topic(name: str, source: str, text: str = EU, **extra: Any) -> dict[str, Any]:
    configs = {VIEW_SOURCE: source, VIEW_FILTER: text}
    return new_topic(name, configs=configs, **extra)


def create_view(broker: Broker, name: str, source: str, text: str = EU, **extra: Any) -> Any:
    [result] = create(broker, 7, view_topic(name, source, text, **extra)).topics
    return result


def _all_topics(m: Any) -> Any:
    return make(
        m.MetadataRequest,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def metadata_topics(broker: Broker) -> dict[str, Any]:
    response = call(broker, metadata.API, 12, _all_topics)
    return {t.name: t for t in response.topics}


def test_a_view_is_a_topic_with_its_sources_partitions(broker: Broker) -> None:
    create_ok(broker, "orders", partitions=3)
    result = create_view(broker, "orders.eu", "orders")
    assert result.error_code is ErrorCode.none, result.error_message
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    assert {c.name: c.value for c in result.configs} == {VIEW_SOURCE: "orders", VIEW_FILTER: EU}
    topics = metadata_topics(broker)
    view, source = topics["orders.eu"], topics["orders"]
    assert view.topic_id not in (None, source.topic_id)
    assert [(p.partition_index, p.leader_id, p.replica_nodes) for p in view.partitions] == [
        (p.partition_index, p.leader_id, p.replica_nodes) for p in source.partitions
    ]
    # No log of its own: the source's partitions serve it.
    assert "orders.eu" not in broker.replica_manager.topics
    assert not any(name == "orders.eu" for name, _ in broker.replica_manager.log_manager.logs)


def test_describe_configs_shows_the_definition(broker: Broker) -> None:
    create_ok(broker, "src")
    create_view(broker, "src.eu", "src")
    [result] = describe(broker, 4, (TOPIC, "src.eu", None), synonyms=True).results
    assert result.error_code is ErrorCode.none
    entries = {e.name: e for e in result.configs}
    assert {n: e.value for n, e in entries.items()} == {VIEW_SOURCE: "src", VIEW_FILTER: EU}
    assert all(e.read_only for e in entries.values())


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("region =", "expected a value after = at position 9"),
        ("region = 'eu' AND", "expected a condition (a header name, a value or '(') at position"),
        ("region LIKE 'e%'", "at position 8"),
        ("", "A view needs kafkalite.view.filter."),
    ],
)
def test_a_bad_filter_is_invalid_config_naming_the_position(
    broker: Broker, text: str, says: str
) -> None:
    create_ok(broker, "src")
    result = create_view(broker, "bad", "src", text)
    assert result.error_code is ErrorCode.invalid_config
    assert says in result.error_message
    assert "bad" not in broker.metadata.topics


def test_view_refusals(broker: Broker) -> None:
    create_ok(broker, "src", partitions=2)
    create_ok(broker, "plain")
    create_view(broker, "src.v", "src")
    cases = [
        (view_topic("a", "nope"), ErrorCode.invalid_config, "topic nope does not exist"),
        (view_topic("b", "src.v"), ErrorCode.invalid_config, "src.v is itself a view"),
        (view_topic("c", "__consumer_offsets"), ErrorCode.invalid_config, "internal topics"),
        (
            new_topic("d", configs={VIEW_SOURCE: "src", VIEW_FILTER: EU, "retention.ms": "1"}),
            ErrorCode.invalid_config,
            "retention.ms belong(s) to its source topic",
        ),
        (
            new_topic("e", configs={VIEW_FILTER: EU}),
            ErrorCode.invalid_config,
            "A view needs kafkalite.view.source.",
        ),
        (view_topic("f", "src", partitions=3), ErrorCode.invalid_partitions, "(2)"),
        (view_topic("g", "src", replication=2), ErrorCode.invalid_replication_factor, "factor 1)"),
        (view_topic("h", "src", assignments=[[1], [1]]), ErrorCode.invalid_request, "assignment"),
        (view_topic("src.v", "src"), ErrorCode.topic_already_exists, "already exists"),
    ]
    for topic, error, says in cases:
        [result] = create(broker, 7, topic).topics
        assert (result.error_code, topic["name"]) == (error, topic["name"])
        assert says in result.error_message
    assert create_view(broker, "ok", "src", partitions=2, replication=1).error_code is (
        ErrorCode.none
    )
    # A view's configs are not topic configs elsewhere.
    response = alter_topic(broker, "plain", (VIEW_SOURCE, SET, "src"))
    assert response.error_code is ErrorCode.invalid_config
    response = alter_topic(broker, "src.v", (VIEW_FILTER, SET, "TRUE"))
    assert response.error_code is ErrorCode.invalid_config
    assert "definition is fixed" in response.error_message
    [grown] = grow(broker, 3, ("src.v", 4, None)).results
    assert grown.error_code is ErrorCode.invalid_request
    assert "add partitions there" in grown.error_message


def test_validate_only_creates_no_view(broker: Broker) -> None:
    create_ok(broker, "src")
    [result] = create(broker, 7, view_topic("v", "src"), validate_only=True).topics
    assert result.error_code is ErrorCode.none
    assert "v" not in broker.metadata.topics


def test_deleting_a_source_with_views_is_refused_naming_them(broker: Broker) -> None:
    create_ok(broker, "src")
    create_view(broker, "src.b", "src")
    create_view(broker, "src.a", "src", "TRUE")
    [refused] = delete_by_name(broker, 6, "src").responses
    assert refused.error_code is ErrorCode.invalid_request
    assert refused.error_message == "Topic src has views (src.a, src.b); delete them first."
    [deleted] = delete_by_name(broker, 6, "src.a").responses
    assert deleted.error_code is ErrorCode.none
    assert "src" in broker.metadata.topics and "src.a" not in broker.metadata.topics
    assert broker.replica_manager.partition("src", 0) is not None  # the source is untouched
    results = delete_by_name(broker, 6, "src.b", "src").responses
    assert [r.error_code for r in results] == [ErrorCode.none, ErrorCode.none]


def test_a_view_grows_with_its_source(broker: Broker) -> None:
    create_ok(broker, "src", partitions=1)
    create_view(broker, "src.v", "src")
    [grown] = grow(broker, 3, ("src", 3, None)).results
    assert grown.error_code is ErrorCode.none
    assert len(metadata_topics(broker)["src.v"].partitions) == 3
    assert broker.metadata.topics["src.v"].num_partitions == 3


def test_produce_to_a_view_is_refused_with_a_message(broker: Broker) -> None:
    create_ok(broker, "src")
    create_view(broker, "src.v", "src")
    m = request_module(0, 9)
    data = make(m.PartitionProduceData, index=0, records=encode_batch([(None, b"v")], timestamp=1))
    request = make(
        m.ProduceRequest,
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(make(m.TopicProduceData, name="src.v", partition_data=(data,)),),
    )
    ctx = RequestContext(broker, 0, 9, correlation_id=11, client_id="tests")
    [answer] = trio.run(produce.handle, ctx, request).responses[0].partition_responses
    assert answer.error_code is ErrorCode.invalid_topic_exception  # not retriable
    assert answer.error_message == "src.v is a view of src and is read-only: produce to src."
    assert broker.replica_manager.partition("src", 0).log_end_offset == 0


def test_views_survive_a_restart(broker_factory: Any, tmp_path: Any) -> None:
    from .conftest import open_broker

    broker = open_broker(tmp_path / "b")
    create_ok(broker, "src", partitions=2)
    create_view(broker, "src.v", "src")
    broker.shutdown()
    again = open_broker(tmp_path / "b")
    try:
        assert again.metadata.topics["src.v"].configs == {VIEW_SOURCE: "src", VIEW_FILTER: EU}
        assert "src.v" not in again.replica_manager.topics
        assert again.replica_manager.view("src.v") is not None
        assert len(metadata_topics(again)["src.v"].partitions) == 2
    finally:
        again.shutdown()


def test_offset_for_leader_epoch_on_a_view_is_the_sources(broker: Broker) -> None:
    create_ok(broker, "src")
    create_view(broker, "src.v", "src")
    batch = encode_batch([(None, b"a"), (None, b"b"), (None, b"c")], timestamp=1)
    results, _ = broker.replica_manager.append_records({("src", 0): batch}, 1)
    assert results[("src", 0)].error is ErrorCode.none

    def build(m: Any) -> Any:
        partition = make(
            m.OffsetForLeaderPartition, partition=0, current_leader_epoch=-1, leader_epoch=0
        )
        topics = tuple(
            make(m.OffsetForLeaderTopic, topic=t, partitions=(partition,)) for t in ("src", "src.v")
        )
        return make(m.OffsetForLeaderEpochRequest, replica_id=-1, topics=topics)

    response = call(broker, offset_for_leader_epoch.API, 4, build)
    answers = [
        (p.error_code, p.leader_epoch, p.end_offset) for t in response.topics for p in t.partitions
    ]
    assert answers == [(ErrorCode.none, 0, 3)] * 2


def test_a_view_cannot_join_a_transaction(broker: Broker) -> None:
    """Its partition would never get its marker: the transaction could not complete."""
    create_ok(broker, "src")
    create_view(broker, "src.v", "src")
    init = call(
        broker,
        init_producer_id.API,
        4,
        lambda m: make(
            m.InitProducerIdRequest,
            transactional_id="tid",
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        ),
    )

    def build(m: Any) -> Any:
        topics = tuple(
            make(m.AddPartitionsToTxnTopic, name=t, partitions=(0,)) for t in ("src", "src.v")
        )
        return make(
            m.AddPartitionsToTxnRequest,
            v3_and_below_transactional_id="tid",
            v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=topics,
        )

    response = call(broker, add_partitions_to_txn.API, 3, build)
    errors = {
        t.name: t.results_by_partition[0].partition_error_code
        for t in response.results_by_topic_v3_and_below
    }
    assert errors == {
        "src": ErrorCode.operation_not_attempted,
        "src.v": ErrorCode.invalid_topic_exception,
    }


def test_index_headers_is_a_topic_config(broker: Broker) -> None:
    create_ok(broker, "indexed", **{"kafkalite.index.headers": " tag , region "})
    assert broker.replica_manager.partition("indexed", 0).log.config.index_headers == "tag,region"
    [result] = create(
        broker, 7, new_topic("bad", configs={"kafkalite.index.headers": "a,,b"})
    ).topics
    assert result.error_code is ErrorCode.invalid_config
    assert "Header names must be non-empty" in result.error_message
    response = alter_topic(broker, "indexed", ("kafkalite.index.headers", SET, "tag"))
    assert response.error_code is ErrorCode.none
    assert broker.replica_manager.partition("indexed", 0).log.config.index_headers == "tag"


def test_reading_a_view_counts_in_its_metrics(broker: Broker) -> None:
    create_ok(broker, "src")
    create_view(broker, "src.v", "src")
    batch = encode_record_batch(
        [Record(i, 1, None, b"v", (("region", b"eu" if i == 1 else b"us"),)) for i in range(4)],
        base_offset=0,
        base_timestamp=1,
        max_timestamp=1,
    )
    results, _ = broker.replica_manager.append_records({("src", 0): batch}, 1)
    assert results[("src", 0)].error is ErrorCode.none
    params = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1_000_000)
    [read] = broker.replica_manager.read_from_local_log(
        params, [FetchInfo("src.v", 0, 0, 1_000_000)]
    ).results
    assert read.error is ErrorCode.none and read.high_watermark == 4
    assert [r.offset for r in decode_records(read.records)] == [1]
    samples = {
        (metric.name, sample.labels["view"]): sample.value
        for metric in BrokerCollector(broker, "PLAINTEXT", {}).collect()
        if metric.name.startswith("kafkalite_view_")
        for sample in metric.samples
    }
    assert samples[("kafkalite_view_records_read", "src.v")] == 4
    assert samples[("kafkalite_view_records_matched", "src.v")] == 1
    assert samples[("kafkalite_view_bytes_read", "src.v")] == len(batch)
    assert samples[("kafkalite_view_bytes_served", "src.v")] == len(read.records)
    assert samples[("kafkalite_view_batches_skipped", "src.v")] == 0
