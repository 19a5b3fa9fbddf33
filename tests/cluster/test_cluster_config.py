"""Cluster-mode properties in kafkalite.config: Kafka's names and defaults, validated."""

from __future__ import annotations

import pytest

from kafkalite.config import ConfigError, build_config


def test_cluster_properties_have_kafkas_defaults() -> None:
    config = build_config({})
    assert not config.cluster_mode
    assert config.str("zookeeper.connect") is None
    assert config.int("zookeeper.session.timeout.ms") == 18000
    assert config.int("zookeeper.connection.timeout.ms") is None
    assert config.str("broker.rack") is None
    assert config.int("default.replication.factor") == 1
    assert config.int("min.insync.replicas") == 1
    assert config.int("replica.lag.time.max.ms") == 30000
    assert config.int("replica.fetch.max.bytes") == 1048576
    assert config.int("replica.fetch.wait.max.ms") == 500
    assert config.int("replica.socket.timeout.ms") == 30000
    assert config.int("num.replica.fetchers") == 1
    assert config.bool("unclean.leader.election.enable") is False
    assert config.bool("auto.leader.rebalance.enable") is True
    assert config.int("leader.imbalance.check.interval.seconds") == 300
    assert config.bool("controlled.shutdown.enable") is True
    assert config.int("request.timeout.ms") == 30000


def test_offsets_topic_replication_factor_is_3_in_cluster_mode_only() -> None:
    assert build_config({}).int("offsets.topic.replication.factor") == 1  # single node
    cluster = build_config({"zookeeper.connect": "127.0.0.1:2181/kafka"})
    assert cluster.cluster_mode
    assert cluster.int("offsets.topic.replication.factor") == 3
    assert cluster.default("offsets.topic.replication.factor") == "3"
    explicit = {"zookeeper.connect": "zk:2181", "offsets.topic.replication.factor": "1"}
    assert build_config(explicit).int("offsets.topic.replication.factor") == 1


@pytest.mark.parametrize(
    "value", ["127.0.0.1:2181", "a:1,b:2,c:3", "zk-1:2181,zk-2:2181/kafka", "h:2181/a/b"]
)
def test_zookeeper_connect_accepts_kafkas_forms(value: str) -> None:
    assert build_config({"zookeeper.connect": value}).str("zookeeper.connect") == value


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"zookeeper.connect": "localhost"}, "invalid value 'localhost' for zookeeper.connect"),
        ({"zookeeper.connect": "h:2181,:2182"}, "':2182' is not host:port"),
        ({"zookeeper.connect": "h:99999"}, "is not host:port"),
        ({"zookeeper.connect": "h:1/kafka/"}, "is not a ZooKeeper path"),
        ({"zookeeper.session.timeout.ms": "0"}, "invalid value '0'"),
        ({"unclean.leader.election.enable": "yes"}, "expected true or false"),
        ({"num.replica.fetchers": "0"}, "invalid value '0' for num.replica.fetchers"),
        ({"leader.imbalance.check.interval.seconds": "0"}, "invalid value"),
        ({"replica.lag.time.max.ms": "-1"}, "invalid value"),
        (
            {"replica.fetch.wait.max.ms": "40000"},
            "replica.fetch.wait.max.ms should always be less than or equal to"
            " replica.lag.time.max.ms",
        ),
        (
            {"replica.fetch.wait.max.ms": "20000", "replica.socket.timeout.ms": "10000"},
            "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms",
        ),
    ],
)
def test_bad_cluster_properties_are_rejected(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(props)
