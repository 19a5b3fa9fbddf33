"""Apache Kafka's own command-line tools (compat/kafka_tools.py) against kafkalite and Apache
Kafka: the same exit code and the same lines printed, except where FINDINGS.md says otherwise.

Every tool runs in its own JVM (a few seconds each). Nothing here changes the shared broker's
state that another test could see: feature updates are the ones both brokers refuse or no-ops.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from compat.kafka_tools import ToolRun, run_tool
from compat.scenario_helpers import (
    admin,
    create_topic,
    produce,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (closes the shared admin clients after the module)
    wait_until,
)
from compat.targets import Target


def lines(run: ToolRun) -> list[str]:
    return [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]


def first_line(run: ToolRun) -> str:
    return lines(run)[0]


# -- kafka-acls ------------------------------------------------------------------------------

SECURITY_DISABLED = "org.apache.kafka.common.errors.SecurityDisabledException"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--list"], "No Authorizer is configured on the broker"),
        (
            ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"],
            "No Authorizer is configured on the broker",
        ),
        (
            ["--remove", "--force", "--allow-principal", "User:alice", "--topic", "t"],
            "No Authorizer is configured.",
        ),
    ],
    ids=["list", "add", "remove"],
)
def test_kafka_acls_without_authorizer(target: Target, args: list[str], message: str) -> None:
    run = run_tool("kafka-acls", target.bootstrap, *args)
    assert (run.exit_code, first_line(run)) == (
        1,
        f"Error while executing ACL command: {SECURITY_DISABLED}: {message}",
    )


# -- kafka-features --------------------------------------------------------------------------

_FEATURE_LINE = re.compile(
    r"Feature: (\S+)\s+SupportedMinVersion: (.+?)\s+SupportedMaxVersion: (.+?)\s+"
    r"FinalizedVersionLevel: (.+?)\s+Epoch: (\d+)"
)


def described_features(target: Target) -> dict[str, tuple[str, str, str]]:
    run = run_tool("kafka-features", target.bootstrap, "describe")
    assert run.exit_code == 0, run
    found = {}
    for line in lines(run):
        match = _FEATURE_LINE.fullmatch(line.strip())
        assert match, line
        name, low, high, level, _epoch = match.groups()  # the epoch is Kafka's log offset
        found[name] = (low, high, level)
    return found


def test_kafka_features_describe(target: Target) -> None:
    features = described_features(target)
    assert set(features) == {
        "eligible.leader.replicas.version",
        "group.version",
        "kraft.version",
        "metadata.version",
        "share.version",
        "streams.version",
        "transaction.version",
    }
    # The 4.3 tool does not name Kafka 4.4's level 33.
    assert features["metadata.version"] == ("3.3-IV3", "UNKNOWN 33", "UNKNOWN 33")
    assert features["group.version"] == ("0", "1", "1")
    assert features["share.version"] == ("0", "2", "2")  # 2: dead-letter topics (KIP-1191)


def test_kafka_features_upgrade_to_the_current_level_is_a_no_op(target: Target) -> None:
    run = run_tool(
        "kafka-features", target.bootstrap, "upgrade", "--feature", "metadata.version=33"
    )
    assert (run.exit_code, lines(run)) == (0, ["metadata.version was upgraded to 33."])


def test_kafka_features_upgrade_beyond_the_supported_range(target: Target) -> None:
    run = run_tool(
        "kafka-features", target.bootstrap, "upgrade", "--feature", "transaction.version=3"
    )
    assert run.exit_code == 1
    refused, summary = lines(run)
    assert refused.startswith(
        "Could not upgrade transaction.version to 3. The update failed for all features since"
        " the following feature had an error: Invalid update version 3 for feature"
        " transaction.version. Local controller "
    )
    assert summary == "1 out of 1 operation(s) failed."


# -- kafka-log-dirs --------------------------------------------------------------------------


def test_kafka_log_dirs_describe_over_two_dirs(
    target_factory: Callable[..., Target], tmp_path: Path, topic_name: Callable[..., str]
) -> None:
    """JBOD: four partitions spread two per directory, each with its size and no lag."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    target = target_factory({"log.dirs": ",".join(str(d) for d in dirs)})
    topic = topic_name()
    create_topic(target.bootstrap, topic, 4)
    prod = producer(target.bootstrap, **{"linger.ms": 0})
    for partition in range(4):  # one batch of one record each: the same bytes on both brokers
        produce_all(prod, topic, [{"value": b"x" * 100, "partition": partition}])
    run = run_tool("kafka-log-dirs", target.bootstrap, "--describe", "--topic-list", topic)
    assert run.exit_code == 0, run
    (described,) = [json.loads(line) for line in lines(run) if line.startswith("{")]
    (broker,) = described["brokers"]
    found = {
        entry["logDir"]: sorted(
            (p["partition"], p["size"], p["offsetLag"], p["isFuture"]) for p in entry["partitions"]
        )
        for entry in broker["logDirs"]
    }
    assert sorted(found) == [str(d) for d in dirs]
    assert sorted(len(partitions) for partitions in found.values()) == [2, 2]
    assert sorted(p for partitions in found.values() for p in partitions) == [
        (f"{topic}-{i}", 170, 0, False) for i in range(4)
    ]


# -- kafka-configs --entity-type brokers -------------------------------------------------------


def configs_tool(target: Target, *args: str) -> ToolRun:
    return run_tool("kafka-configs", target.bootstrap, "--entity-type", "brokers", *args)


def test_kafka_configs_cluster_default_takes_effect_at_once(
    target_factory: Callable[..., Target], topic_name: Callable[..., str]
) -> None:
    target = target_factory()
    topic = topic_name()
    create_topic(target.bootstrap, topic, 1)
    big = {"value": b"x" * 1_500_000, "partition": 0}
    prod = producer(target.bootstrap, **{"linger.ms": 0, "message.max.bytes": 4_000_000})
    refused = produce(prod, topic, [big]).reports
    assert [r.error.name() for r in refused] == ["MSG_SIZE_TOO_LARGE"]

    run = configs_tool(
        target,
        "--entity-default",
        "--alter",
        "--add-config",
        "log.retention.ms=86400001,message.max.bytes=2000000",
    )
    assert (run.exit_code, lines(run)) == (
        0,
        ["Completed updating default config for brokers in the cluster."],
    )
    described = lines(configs_tool(target, "--entity-default", "--describe"))
    assert described[0] == "Default configs for brokers in the cluster are:"
    # Kafka's KRaft bootstrap also writes min.insync.replicas=1 there (FINDINGS.md).
    assert [line.strip() for line in described[1:] if "min.insync.replicas" not in line] == [
        "log.retention.ms=86400001 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400001}",
        "message.max.bytes=2000000 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000000}",
    ]
    # No restart: the topic's logs take the new maximum (Kafka applies it a moment later).
    wait_until(lambda: not produce(prod, topic, [big]).failed, message="a 1.5 MB record accepted")


def test_kafka_configs_refuses_a_static_property(target: Target) -> None:
    run = configs_tool(target, "--entity-default", "--alter", "--add-config", "log.dirs=/x")
    assert run.exit_code == 1
    assert (
        "org.apache.kafka.common.errors.InvalidRequestException: "
        "Cannot update these configs dynamically: [log.dirs]"
    ) in lines(run)[1]


def test_kafka_configs_per_broker(target_factory: Callable[..., Target]) -> None:
    target = target_factory()
    node = str(admin(target.bootstrap).describe_cluster().result(timeout=20).nodes[0].id)
    run = configs_tool(
        target, "--entity-name", node, "--alter", "--add-config", "log.retention.bytes=12345"
    )
    assert (run.exit_code, lines(run)) == (0, [f"Completed updating config for broker {node}."])
    described = lines(configs_tool(target, "--entity-name", node, "--describe"))
    assert [line.strip() for line in described] == [
        f"Dynamic configs for broker {node} are:",
        "log.retention.bytes=12345 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.bytes=12345, DEFAULT_CONFIG:log.retention.bytes=-1}",
    ]
