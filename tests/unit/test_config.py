from pathlib import Path

import pytest

from kafkalite.config import (
    ConfigError,
    Listener,
    build_config,
    parse_listeners,
    parse_override,
    read_properties,
)


def test_defaults_match_kafka() -> None:
    config = build_config({})
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.retention_ms == 14 * 24 * 3_600_000
    assert config.roll_ms == 7 * 24 * 3_600_000
    assert config.int("log.segment.bytes") == 1024**3
    assert config.int("message.max.bytes") == 1048588
    assert config.bool("auto.create.topics.enable") is True


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert build_config({"log.retention.hours": "1"}).retention_ms == 3_600_000
    props = {"log.retention.hours": "1", "log.retention.minutes": "2"}
    assert build_config(props).retention_ms == 120_000
    assert build_config({**props, "log.retention.ms": "5"}).retention_ms == 5
    assert build_config({"log.retention.ms": "-1"}).retention_ms == -1


def test_overrides_win_over_file() -> None:
    config = build_config({"num.partitions": "3"}, [parse_override("num.partitions=6")])
    assert config.int("num.partitions") == 6


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"no.such.property": "1"}, "unknown property"),
        ({"num.partitions": "zero"}, "invalid value"),
        ({"num.partitions": "0"}, "invalid value"),
        ({"auto.create.topics.enable": "yes"}, "invalid value"),
        ({"listeners": "localhost:9092"}, "invalid value"),
        ({"log.message.timestamp.type": "Now"}, "invalid value"),
        ({"max.connections": "-1"}, "invalid value '-1' for max.connections"),
        ({"max.connection.creation.rate": "fast"}, "invalid value 'fast' for max.connection"),
        ({"listener.name.plaintext.max.connections": "-3"}, "invalid value '-3' for listener"),
    ],
)
def test_bad_properties_are_rejected(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(props)


def test_override_needs_key_and_value() -> None:
    with pytest.raises(ConfigError):
        parse_override("listeners")


def test_listeners_parse_ipv6_and_empty_host() -> None:
    assert parse_listeners("PLAINTEXT://[::1]:9092,internal://:9093") == (
        Listener("PLAINTEXT", "::1", 9092),
        Listener("INTERNAL", "", 9093),
    )
    advertised = build_config({"listeners": "PLAINTEXT://:9092"}).advertised_listeners
    assert advertised == (Listener("PLAINTEXT", "localhost", 9092),)


def test_read_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# comment\n! also\n\nbroker.id=3\nlog.dirs : /tmp/x\n")
    assert read_properties(path) == {"broker.id": "3", "log.dirs": "/tmp/x"}
    with pytest.raises(ConfigError, match="cannot read"):
        read_properties(tmp_path / "missing.properties")


def test_shipped_server_properties_are_valid() -> None:
    shipped = Path(__file__).parents[2] / "config" / "server.properties"
    config = build_config(read_properties(shipped))
    assert config.listeners[0].port == 9092
    assert str(config.log_dir) == "data"


def test_a_cluster_takes_an_authorizer() -> None:  # its ACLs live in ZooKeeper's /kafka-acl
    overrides = {
        "zookeeper.connect": "127.0.0.1:2181",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    }
    assert build_config(overrides).str("authorizer.class.name")


def test_tiered_storage_is_accepted_in_a_cluster() -> None:
    """The remote segment lists are replicated through __remote_log_metadata (its Kafka
    rlmm.config.* settings)."""
    config = build_config(
        {
            "zookeeper.connect": "127.0.0.1:2181",
            "remote.log.storage.system.enable": "true",
            "rsm.config.storage.s3.bucket.name": "b",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        }
    )
    assert config.int("rlmm.config.remote.log.metadata.topic.num.partitions") == 3
    assert config.int("rlmm.config.remote.log.metadata.topic.replication.factor") == 3
