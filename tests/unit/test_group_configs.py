"""Group configs (broker/group_configs.py) and share.auto.offset.reset's parsing, without a
broker: Kafka 4.4's checks and messages, the effective values and their capping."""

from __future__ import annotations

import pytest

from kafkalite.broker.group_configs import (
    READ_COMMITTED,
    InvalidGroupConfig,
    share_group_settings,
    validate_group_configs,
)
from kafkalite.config import build_config
from kafkalite.share.auto_offset_reset import parse, parse_duration_ms

WIDE = {
    "group.share.min.session.timeout.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
}


def test_the_session_must_outlast_the_heartbeat() -> None:
    broker = build_config(WIDE)
    with pytest.raises(InvalidGroupConfig) as refused:
        validate_group_configs({"share.session.timeout.ms": "5000"}, broker)
    assert str(refused.value) == (
        "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
    )
    ok = {"share.session.timeout.ms": "5000", "share.heartbeat.interval.ms": "2000"}
    assert validate_group_configs(ok, broker) == ok


def test_configs_kafka_has_but_kafkalite_does_not_apply_are_refused() -> None:
    with pytest.raises(InvalidGroupConfig, match="not supported by kafkalite"):
        validate_group_configs({"consumer.session.timeout.ms": "45000"}, build_config({}))


def test_settings_default_to_the_broker_and_are_capped_into_its_bounds() -> None:
    broker = build_config({"group.share.record.lock.duration.ms": "20000"})
    defaults = share_group_settings(broker, {})
    assert (defaults.record_lock_duration_ms, defaults.delivery_count_limit) == (20000, 5)
    assert str(defaults.auto_offset_reset) == "latest"
    # Set when the bounds were wider: capped, as Kafka's GroupConfig.evaluate.
    stale = {"share.record.lock.duration.ms": "90000", "share.isolation.level": "read_committed"}
    settings = share_group_settings(broker, stale)
    assert (settings.record_lock_duration_ms, settings.isolation_level) == (60000, READ_COMMITTED)


@pytest.mark.parametrize(
    ("text", "millis"),
    [("PT1H", 3_600_000), ("P1DT2M", 86_520_000), ("PT0.25S", 250), ("pt10s", 10_000)],
)
def test_iso_8601_durations_as_java_reads_them(text: str, millis: int) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize("text", ["P", "PT", "1H", "PT1.5H", ""])
def test_what_java_does_not_read_as_a_duration(text: str) -> None:
    assert parse_duration_ms(text) is None


def test_auto_offset_reset_strategies() -> None:
    assert str(parse("EARLIEST")) == "earliest"
    assert parse("by_duration:PT1M").duration_ms == 60_000
    with pytest.raises(ValueError, match="by_duration:<PnDTnHnMn.nS>"):
        parse("by_duration:-PT1M")


def test_the_dead_letter_configs_are_checked_as_kafka_does() -> None:
    broker = build_config({})
    with pytest.raises(InvalidGroupConfig) as refused:
        validate_group_configs({"errors.deadletterqueue.topic.name": "__internal"}, broker)
    assert str(refused.value) == (
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
    )
    with pytest.raises(InvalidGroupConfig) as refused:
        validate_group_configs({"errors.deadletterqueue.copy.record.enable": "yes"}, broker)
    assert str(refused.value) == (
        "Invalid value yes for configuration errors.deadletterqueue.copy.record.enable: "
        "Expected value to be either true or false"
    )
    # The prefix and the topic's own opt-in are checked when writing, as in Kafka.
    configs = {
        "errors.deadletterqueue.topic.name": "anything",
        "errors.deadletterqueue.copy.record.enable": "TRUE",
    }
    assert validate_group_configs(configs, broker) == {
        "errors.deadletterqueue.topic.name": "anything",
        "errors.deadletterqueue.copy.record.enable": "true",
    }
    settings = share_group_settings(broker, {"errors.deadletterqueue.topic.name": "dlq.q"})
    assert (settings.dlq_topic, settings.dlq_copy_record) == ("dlq.q", False)
    assert share_group_settings(broker, {}).dlq_topic == ""
