"""Dynamic broker configs: per broker and cluster default, precedence and sources, persisted,
applied to the partition logs at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import alter_configs
from kafkalite.broker.broker import DYNAMIC_CONFIGS_FILE, Broker
from kafkalite.broker.dynamic_config import SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT
from kafkalite.broker.topic_config import SOURCE_DEFAULT, SOURCE_STATIC_BROKER
from kafkalite.protocol.entities import make

from .conftest import open_broker
from .harness import call
from .test_admin_apis import BROKER, DELETE, SET, alter, create_ok, describe, describe_topic


def broker_configs(broker: Broker, name: str = "0") -> dict[str, Any]:
    [result] = describe(broker, 4, (BROKER, name, None), synonyms=True).results
    assert result.error_code == ErrorCode.none
    return {entry.name: entry for entry in result.configs}


def levels(entry: Any) -> list[tuple[str, int]]:
    return [(s.value, s.source) for s in entry.synonyms]


def set_broker(broker: Broker, name: str, *ops: tuple[str, int, str | None], **kw: Any) -> Any:
    [response] = alter(broker, 1, (BROKER, name, ops), **kw).responses
    return response


@pytest.fixture
def broker(broker_factory: Callable[..., Broker]) -> Broker:
    broker = broker_factory(**{"message.max.bytes": "5000"})
    create_ok(broker, "t", 2)
    return broker


def test_per_broker_over_default_over_static(broker: Broker) -> None:
    assert set_broker(broker, "", ("message.max.bytes", SET, "6000")).error_code == ErrorCode.none
    entry = broker_configs(broker)["message.max.bytes"]
    assert (entry.value, entry.config_source, entry.read_only) == (
        "6000",
        SOURCE_DYNAMIC_DEFAULT,
        False,
    )
    assert set_broker(broker, "0", ("message.max.bytes", SET, "7000")).error_code == ErrorCode.none
    assert levels(broker_configs(broker)["message.max.bytes"]) == [
        ("7000", SOURCE_DYNAMIC_BROKER),
        ("6000", SOURCE_DYNAMIC_DEFAULT),
        ("5000", SOURCE_STATIC_BROKER),
        ("1048588", SOURCE_DEFAULT),
    ]
    # The cluster default resource lists its own dynamic configs only.
    default = broker_configs(broker, "")
    assert [(e.name, e.value, e.config_source) for e in default.values()] == [
        ("message.max.bytes", "6000", SOURCE_DYNAMIC_DEFAULT)
    ]
    # Topics follow: the synonym chain and the value their logs run with.
    topic_entry = describe_topic(broker, "t", synonyms=True)["max.message.bytes"]
    assert (topic_entry.value, topic_entry.config_source) == ("7000", SOURCE_DYNAMIC_BROKER)
    assert [(s.name, s.source) for s in topic_entry.synonyms][:2] == [
        ("message.max.bytes", SOURCE_DYNAMIC_BROKER),
        ("message.max.bytes", SOURCE_DYNAMIC_DEFAULT),
    ]
    for index in range(2):
        assert broker.replica_manager.partition("t", index).log.config.max_message_bytes == 7000
    assert set_broker(broker, "0", ("message.max.bytes", DELETE, None)).error_code == ErrorCode.none
    assert broker.replica_manager.partition("t", 0).log.config.max_message_bytes == 6000


def test_retention_applies_without_restart_and_survives_one(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    create_ok(broker, "t")
    response = set_broker(broker, "0", ("log.retention.ms", SET, "60000"))
    assert response.error_code == ErrorCode.none
    assert broker.replica_manager.partition("t", 0).log.config.retention_ms == 60000
    broker.shutdown()
    assert (tmp_path / DYNAMIC_CONFIGS_FILE).is_file()
    again = open_broker(tmp_path)
    try:
        assert again.replica_manager.partition("t", 0).log.config.retention_ms == 60000
        entry = broker_configs(again)["log.retention.ms"]
        assert (entry.value, entry.config_source) == ("60000", SOURCE_DYNAMIC_BROKER)
    finally:
        again.shutdown()


def test_refusals_change_nothing(broker: Broker) -> None:
    cases = [
        (("log.dirs", SET, "/x"), "Cannot update these configs dynamically: [log.dirs]"),
        (
            ("log.retention.ms", SET, "soon"),
            "Invalid value soon for configuration log.retention.ms: Not a number of type LONG",
        ),
        (("no.such.property", SET, "1"), "Unknown broker configs: no.such.property"),
    ]
    for op, message in cases:
        response = set_broker(broker, "0", op)
        assert response.error_code == ErrorCode.invalid_request
        assert response.error_message == message
    response = set_broker(broker, "0", ("log.retention.ms", SET, "1000"), validate_only=True)
    assert response.error_code == ErrorCode.none
    assert broker_configs(broker)["log.retention.hours"].config_source == SOURCE_DEFAULT
    unset = broker_configs(broker)["log.retention.ms"]
    assert (unset.value, unset.config_source, unset.synonyms) == (None, SOURCE_DEFAULT, ())
    assert broker.dynamic is not None and broker.dynamic.configs("0") == {}


@pytest.mark.parametrize("version", [0, 2])
def test_legacy_alter_configs_replaces_the_dynamic_configs(broker: Broker, version: int) -> None:
    assert set_broker(broker, "0", ("log.retention.bytes", SET, "100")).error_code == ErrorCode.none

    def build(m: Any) -> Any:
        entry = make(m.AlterableConfig, name="log.segment.bytes", value="2000000")
        resource = make(
            m.AlterConfigsResource, resource_type=BROKER, resource_name="0", configs=(entry,)
        )
        return make(m.AlterConfigsRequest, resources=(resource,), validate_only=False)

    [response] = call(broker, alter_configs.API, version, build).responses
    assert response.error_code == ErrorCode.none
    assert broker.dynamic is not None
    assert broker.dynamic.configs("0") == {"log.segment.bytes": "2000000"}
    assert broker.replica_manager.partition("t", 0).log.config.segment_bytes == 2000000


def test_connection_limits_are_dynamic_also_per_listener(broker: Broker) -> None:
    scoped = "listener.name.plaintext.max.connection.creation.rate"
    ops = (("max.connections", SET, "100"), (scoped, SET, "50"))
    assert set_broker(broker, "", *ops).error_code == ErrorCode.none
    limits = broker.quotas.connections.limits
    assert (limits.max_connections, limits.listener_max_rate) == (100, {"PLAINTEXT": 50})
    default = broker_configs(broker, "")
    assert [(e.name, e.value, e.read_only) for e in default.values()] == [
        ("max.connections", "100", False),
        (scoped, "50", False),
    ]
    assert levels(broker_configs(broker)[scoped]) == [("50", SOURCE_DYNAMIC_DEFAULT)]
    for name in ("max.connections", "listener.name.plaintext.max.connections"):
        refused = set_broker(broker, "", (name, SET, "0"))  # would lock every client out
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.invalid_request,
            "Invalid max.connections 0",
        )
    refused = set_broker(broker, "", ("listener.name.plaintext.ssl.keystore.location", SET, "x"))
    assert refused.error_code == ErrorCode.invalid_request
    assert refused.error_message == (
        "Cannot update these configs dynamically: [listener.name.plaintext.ssl.keystore.location]"
    )
